"""The configuration of one unlearning run: every command-line option is also a key of a YAML config file.

Values are converted to each option's declared type and checked against its range before anything is loaded, so
``lr: 1e-5`` in YAML (a string under YAML 1.1) is the number 1e-5 and ``--param beta=0`` is refused up front.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from unlearn_tasks.muse.corpora import HUB_IDS as MUSE_HUB_IDS
from unlearn_tasks.muse.corpora import corpus_of
from unlearn_tasks.tofu.splits import HUB_ID

DTYPES = ("float32", "bfloat16", "float16", "auto")


@dataclass
class RunConfig:
    method: str = "npo"
    model: str = ""
    out: str = ""
    data: str = "tofu"  # "tofu" (= locuslab/TOFU), "demo" (embedded corpus), "evaldu" (data_dir = an Eval-DU folder),
    # "muse_news" / "muse_books" (MUSE's raw text corpora) or a Hub id
    evaldu_target: int | None = None  # with data="evaldu": the relationship fact to unlearn
    evaldu_minimal_set: bool = False  # with data="evaldu": unlearn a whole minimal deep-unlearning set (white-box)
    data_dir: str | None = None
    modality: str = "both"  # with data="clear": train on "text", "image" or "both" kinds of CLEAR rows
    forget: str = "forget10"
    retain: str | None = None  # default: retainXX matching the forget split
    lora: bool = True
    merge: bool = False
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    lora_target_modules: str | list[str] = "all-linear"
    l1_lora: float = 0.0
    epochs: float = 5.0
    lr: float = 1e-4
    batch_size: int = 8
    grad_accum: int = 1
    warmup_steps: int = 0
    max_length: int = 256
    seed: int = 0
    dtype: str = "float32"
    idk_file: str | None = None
    method_params: dict[str, Any] = field(default_factory=dict)
    save_steps: int | None = None
    resume: bool = False
    overwrite: bool = False  # allow writing into a non-empty --out (never into --model itself)
    eval_tasks: list[str] = field(default_factory=list)
    eval_metadata: dict[str, Any] = field(default_factory=dict)
    eval_every: int | None = None  # also evaluate eval_tasks on the live weights every N optimizer steps
    eval_limit: int | None = None  # documents per task in every evaluation of the run (smoke tests)
    select: str | None = None  # "TASK/METRIC:max" (or :min): keep the best evaluated step's weights as the output
    select_if: list[str] = field(default_factory=list)  # checks a step must pass to be selected (baseline = step 0)
    push_to_hub: str | None = None
    hub_private: bool = True
    progress: bool = True

    @property
    def dataset(self) -> str:
        if self.data == "clear":
            from unlearn_tasks.clear.splits import HUB_ID as CLEAR_HUB_ID

            return CLEAR_HUB_ID
        if self.data == "tofu":
            return HUB_ID
        corpus = corpus_of(self.data)
        return MUSE_HUB_IDS[corpus] if corpus else self.data

    @property
    def text_data(self) -> bool:
        """Whether the forget / retain data are raw text corpora (MUSE) rather than QA pairs."""
        return corpus_of(self.data) is not None

    def validate(self) -> None:
        """Convert every field to its declared type and check ranges; raises ValueError naming the option."""
        hints = typing.get_type_hints(RunConfig)
        for f in dataclasses.fields(self):
            setattr(self, f.name, coerce(getattr(self, f.name), hints[f.name], "--" + f.name.replace("_", "-")))
        missing = [k for k in ("model", "out") if not getattr(self, k)]
        if missing:
            raise ValueError(f"Missing required option(s): {', '.join('--' + m for m in missing)}.")
        if self.data == "evaldu" and (self.evaldu_target is None or not self.data_dir):
            raise ValueError("--data evaldu needs --data-dir (an Eval-DU JSON folder) and --evaldu-target FACT_ID.")
        if self.modality not in ("text", "image", "both"):
            raise ValueError(f"--modality must be text, image or both, got {self.modality!r}.")
        if self.merge and not self.lora:
            raise ValueError("--merge only applies to LoRA runs; full fine-tuning already saves merged weights.")
        for key in ("epochs", "lr", "batch_size", "grad_accum", "max_length", "lora_r", "lora_alpha"):
            if getattr(self, key) <= 0:
                raise ValueError(f"--{key.replace('_', '-')} must be positive, got {getattr(self, key)}.")
        for key in ("l1_lora", "warmup_steps"):
            if getattr(self, key) < 0:
                raise ValueError(f"--{key.replace('_', '-')} must be >= 0, got {getattr(self, key)}.")
        if not 0 <= self.lora_dropout < 1:
            raise ValueError(f"--lora-dropout must be in [0, 1), got {self.lora_dropout}.")
        if self.save_steps is not None and self.save_steps <= 0:
            raise ValueError(f"--save-steps must be positive, got {self.save_steps}.")
        if self.eval_every is not None and self.eval_every <= 0:
            raise ValueError(f"--eval-every must be a positive number of optimizer steps, got {self.eval_every}.")
        if self.eval_limit is not None and self.eval_limit <= 0:
            raise ValueError(f"--eval-limit must be a positive number of documents, got {self.eval_limit}.")
        for key in ("eval_every", "select"):
            if getattr(self, key) is not None and not self.eval_tasks:
                raise ValueError(f"--{key.replace('_', '-')} needs --eval-tasks (the lm-eval tasks to run during "
                                 f"training), e.g. --eval-tasks tofu_forget10 --eval-every 10.")
        if self.select_if and self.select is None:
            raise ValueError("--select-if needs --select (it restricts which evaluated steps --select may choose).")
        if self.select is not None and self.eval_every is None:
            raise ValueError("--select needs --eval-every STEPS: it picks the best of the evaluations made during "
                             "training.")
        if self.dtype not in DTYPES:
            raise ValueError(f"--dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}.")
        self.method_params = coerce_method_params(self.method, self.method_params)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))


# --------------------------------------------------------------------------- typed values
_TRUE, _FALSE = {"true", "yes", "on", "1"}, {"false", "no", "off", "0"}


def _scalar(value: Any, kind: type, name: str) -> Any:
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise ValueError(f"{name} must be true or false, got {value!r}.")
    if kind in (int, float):
        if isinstance(value, bool):
            raise ValueError(f"{name} must be a number, got {value!r}.")
        try:
            number = float(value) if kind is float else value
            if kind is int:
                number = int(value, 10) if isinstance(value, str) else value
                if isinstance(number, float) and number.is_integer():
                    number = int(number)
                if not isinstance(number, int):
                    raise ValueError
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be {'an integer' if kind is int else 'a number'}, got {value!r}.") from None
        if kind is float and not math.isfinite(number):
            raise ValueError(f"{name} must be a finite number, got {value!r}.")
        return number
    if kind is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise ValueError(f"{name} must be a string, got {value!r}.")
    return value


def coerce(value: Any, annotation: Any, name: str) -> Any:
    """``value`` converted to ``annotation`` (int, float, bool, str, ``X | None``, ``list[str]``, ``dict``, unions)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        # prefer the option that already matches (str | list[str] keeps a list a list)
        for option in options:
            base = typing.get_origin(option) or option
            if isinstance(base, type) and isinstance(value, base) and not (base is int and isinstance(value, bool)):
                return coerce(value, option, name)
        errors = []
        for option in options:
            try:
                return coerce(value, option, name)
            except ValueError as e:
                errors.append(str(e))
        raise ValueError(errors[0])
    if origin is list:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{name} must be a list, got {value!r}.")
        return [coerce(v, args[0], name) for v in value] if args else list(value)
    if origin is dict or annotation is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{name} must be a mapping (KEY: VALUE), got {value!r}.")
        return dict(value)
    if annotation is Any:
        return value
    if value is None:
        raise ValueError(f"{name} must not be empty.")
    return _scalar(value, annotation, name)


def coerce_method_params(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` parsed and checked by the method's declared hyperparameters (its ``Params`` dataclass, see
    :mod:`unlearn_methods.params`), defaults filled in; raises ValueError naming the parameter."""
    from unlearn_methods import all_methods

    methods = all_methods()
    cls = methods.get(method.lower().replace("-", "_"))
    if cls is None:
        raise ValueError(f"Unknown method {method!r}; available: {', '.join(sorted(methods))}.")
    return cls.Params.from_dict(params, cls.name).to_dict()


def load_run_config(path: str | Path | None = None, params: dict[str, Any] | None = None,
                    **overrides: Any) -> RunConfig:
    """A RunConfig from a YAML file (optional) with ``overrides`` (e.g. command-line options) on top; ``params``
    (``--param KEY=VALUE``) go over the file's ``method_params``. Raises ValueError naming what to fix."""
    values: dict[str, Any] = {}
    if path:
        try:
            loaded = yaml.safe_load(Path(path).read_text()) or {}
        except FileNotFoundError:
            raise ValueError(f"Config file {path} does not exist.") from None
        except (OSError, yaml.YAMLError) as e:
            raise ValueError(f"Cannot read the config file {path}: {e}") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: expected a mapping of option names to values.")
        values.update(loaded)
    values.update({k: v for k, v in overrides.items() if v is not None})
    if params:
        if not isinstance(values.get("method_params", {}), dict):
            raise ValueError(f"method_params in {path} must be a mapping.")
        values["method_params"] = {**values.get("method_params", {}), **params}
    known = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"Unknown option(s) {unknown} in {path or 'the command line'}; known: {sorted(known)}.")
    cfg = RunConfig(**values)
    cfg.validate()
    return cfg
