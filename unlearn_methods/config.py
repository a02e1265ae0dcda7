"""The configuration of one unlearning run: every command-line option is also a key of a YAML config file.

Values are converted to each option's declared type and checked against its range before anything is loaded, so
``lr: 1e-5`` in a config file (read by :mod:`unlearn_tasks.settings`, as YAML 1.2 reads numbers) is the number 1e-5,
``lr: -1`` is ``FILE:LINE: lr: must be positive`` and ``--param beta=0`` is refused up front.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from unlearn_methods import (
    blur,  # noqa: F401 (BLUR's data source registers itself)
    dusk,  # noqa: F401 (DUSK's data source registers itself)
    knowundo,  # noqa: F401 (KnowUnDo's data source registers itself)
    lume,  # noqa: F401 (LUME's data source registers itself)
    rwku,  # noqa: F401 (RWKU's data source, beside its training code, registers itself)
)
from unlearn_methods.data_sources import SOURCES, DataSource, data_help, data_source
from unlearn_methods.params import MAX_SEED, in_range, option
from unlearn_methods.prompt_format import FORMATS, check_template_args
from unlearn_tasks.settings import SettingsError, read_settings

DTYPES = ("float32", "bfloat16", "float16", "auto")
#: The most epochs a run may ask for (more is a typo, and overflows the trainer's step count long before).
MAX_EPOCHS = 10_000


@dataclass
class RunConfig:
    """Every option of ``unlearn run``, declared once: the command-line flags, the defaults in ``--help``, the
    checks of :meth:`validate`, the keys of a ``--config`` YAML file and of the saved ``unlearn_config.yaml``, and
    what ``--resume`` compares all come from these fields (see :func:`option`)."""

    method: str = option("npo", "Method name; `unlearn methods` lists them.", resume=True)
    model: str = option("", "Hub id or local folder of the model to unlearn from.", required=True, resume=True,
                        path=True)
    out: str = option("", "Output folder for the checkpoint.", required=True, path=True)
    data: str = option("tofu", data_help(), resume=True)
    data_dir: str | None = option(None, "Local folder laid out like the Hub dataset repository.", resume=True,
                                  path=True)
    forget: str = option("forget10", "Forget split.", resume=True,
                         default_text="forget10; MUSE: forget, or CONFIG/SPLIT such as scal/forget_2; DUSK: "
                                      "forget_chronological")
    retain: str | None = option(None, "Retain split.", resume=True,
                                default_text="retain90 for forget10, etc.; MUSE: retain1; DUSK: the other styles")
    lora: bool = option(True, "Train LoRA adapters.", negative=("--full", "Full fine-tuning of all weights."),
                        resume=True)
    merge: bool = option(False, "Save LoRA runs as merged full weights instead of an adapter.", resume=True)
    lora_r: int = option(8, "LoRA rank.", gt=0, resume=True)
    lora_alpha: int = option(16, "LoRA alpha (the update is scaled by alpha / r).", flag=None, gt=0, resume=True)
    lora_dropout: float = option(0.0, "Dropout on the LoRA inputs.", flag=None, ge=0, lt=1, resume=True)
    lora_target_modules: str | list[str] = option("all-linear", "Modules that get LoRA adapters.", flag=None,
                                                  resume=True)
    l1_lora: float = option(0.0, "L1 penalty weight on LoRA weights (CLEAR's regulariser).", ge=0, resume=True)
    epochs: float = option(5.0, "Training epochs over the forget set.", gt=0, le=MAX_EPOCHS)
    lr: float = option(1e-4, "Learning rate.", gt=0, resume=True)
    batch_size: int = option(8, "Per-device batch size.", gt=0, resume=True)
    grad_accum: int = option(1, "Gradient accumulation steps.", gt=0, resume=True)
    warmup_steps: int = option(0, "Learning-rate warm-up steps.", flag=None, ge=0, resume=True)
    gradient_checkpointing: bool = option(False, "Keep only each layer's input during the forward pass and recompute "
                                          "the rest during backward: the activations' memory drops to a fraction, "
                                          "each step does about one more forward pass, the weights are the same.")
    max_length: int = option(256, "Max tokens per QA pair or raw-text chunk (MUSE used 2048).", gt=0, resume=True)
    seed: int = option(0, "Seed for data pairing and training.", ge=0, le=MAX_SEED, resume=True)
    dtype: str = option("float32", "Weights' dtype.", choices=DTYPES, resume=True)
    idk_file: str | None = option(None, "Refusal answers, one per line.", default_text="the built-in list",
                                  resume=True, path=True)
    prompt_format: str = option("auto", "How question-answer pairs become training tokens: chat = inside the model's "
                                "chat template, exactly as open-unlearning trains (labels on everything after the "
                                "generation prompt, EOS appended); plain = TOFU's 'Question: ...\\nAnswer:' prompt; "
                                "auto = chat when the tokenizer has a chat template, else plain. Saved resolved; the "
                                "model card's lm_eval command carries the matching flags. Raw text (MUSE) and CLEAR "
                                "stay plain.", choices=FORMATS, resume=True)
    system_prompt: str | None = option(None, "With the chat format: the system turn, e.g. 'You are a helpful "
                                       "assistant.' (open-unlearning's Llama setting).", resume=True, metavar="TEXT",
                                       default_text="none (the template's own default, if it has one)")
    chat_template_args: dict[str, Any] = option({}, "With the chat format: a keyword argument of the chat template, "
                                                "e.g. --chat-template-arg 'date_string=10 Apr 2025' (open-unlearning's "
                                                "Llama-3 setting); true/false become booleans; repeatable.",
                                                flag="--chat-template-arg", repeat=True, metavar="KEY=VALUE",
                                                resume=True)
    ou_chat_mask: bool = option(True, "With the chat format: open-unlearning's attention mask, input_ids != pad token, "
                                "which hides every end-of-turn token where the pad token is the end of turn "
                                "(SmolLM2, Llama-3 padded with EOS), as open-unlearning trains and as the TOFU tasks' "
                                "chat mode scores (their ou_chat_mask option).",
                                negative=("--no-ou-chat-mask", "With the chat format: attend to every token but the "
                                          "padding."), resume=True)
    method_params: dict[str, Any] = option({}, "Method hyperparameter, e.g. --param beta=0.2 (repeatable); read as "
                                           "the parameter's declared type and checked against its range before "
                                           "training. `unlearn methods` lists each method's parameters.",
                                           flag="--param", repeat=True, metavar="KEY=VALUE",
                                           resume=True)
    save_steps: int | None = option(None, "Checkpoint every N steps.", gt=0, default_text="every epoch")
    resume: bool = option(False, "Resume from the last checkpoint of the run in OUT.partial (a stopped run) or OUT "
                          "(only when its unlearn_config.yaml matches this run's method, data and hyperparameters; on "
                          "another number of processes only at the same global batch).")
    overwrite: bool = option(False, "Allow a non-empty OUT (replaced as a whole when the new checkpoint is complete) "
                             "or an unfinished OUT.partial (discarded). OUT may never be the --model folder or inside "
                             "it.")
    eval_tasks: list[str] = option([], "Comma-separated lm-eval tasks to run on the result (e.g. tofu_forget10).")
    eval_metadata: dict[str, Any] = option({}, "Task options for the evaluations, as lm_eval --metadata, e.g. "
                                           "'{\"reference\": \"ref/\"}' (Forget Quality and PrivLeak need a reference "
                                           "run).", metavar="JSON")
    eval_every: int | None = option(None, "Also run --eval-tasks on the current weights every STEPS optimizer steps, "
                                    "in process, and at steps 0 and the last one: one row per evaluation in "
                                    "OUT/eval_during_training.jsonl, plotted in OUT/eval_during_training.png.",
                                    gt=0, unit="optimizer steps", metavar="STEPS")
    eval_limit: int | None = option(None, "Documents per task in every evaluation of the run (smoke tests).", gt=0,
                                    unit="documents", metavar="N", default_text="all")
    select: str | None = option(None, "With --eval-every: keep the weights of the best evaluated step as the output "
                                "(not the last step's), e.g. tofu_forget10/forget_quality:max or "
                                "abs(tofu_forget10/privleak):min (the left side of an `unlearn ci` check). NaN values "
                                "are never selected. The step is recorded in train_metrics.json and the model card.",
                                metavar="TASK/METRIC:max|min")
    select_if: list[str] = option([], "With --select: only steps passing this `unlearn ci` check may be chosen "
                                  "(repeatable); baseline is the step-0 value, e.g. "
                                  "'tofu_forget10/model_utility >= 0.9 * baseline'.", repeat=True,
                                  metavar="CHECK")
    push_to_hub: str | None = option(None, "Upload the checkpoint to this Hub repo (private).", metavar="REPO")
    hub_private: bool = option(True, "Make a newly created Hub repo public.", flag="--public", inverted=True)
    progress: bool = option(True, "Hide progress bars.", flag="--quiet", inverted=True)

    @property
    def source(self) -> DataSource:
        """The data source of ``data`` (:mod:`unlearn_methods.data_sources`)."""
        return data_source(self.data)

    @property
    def dataset(self) -> str:
        return self.source.dataset(self.data)

    @property
    def text_data(self) -> bool:
        """Whether the forget / retain data are raw text corpora (MUSE) rather than QA pairs."""
        return self.source.text

    def validate(self) -> None:
        """Convert every field to its declared type and check its declared range, then the rules between options;
        raises ValueError naming the option."""
        hints = run_hints()
        fields = run_fields()
        for f in fields:
            setattr(self, f.name, coerce(getattr(self, f.name), hints[f.name], option_name(f)))
        missing = [option_name(f) for f in fields if f.metadata["required"] and not getattr(self, f.name)]
        if missing:
            raise ValueError(f"Missing required option(s): {', '.join(missing)}.")
        self.source.check(self)
        for f in fields:
            value = getattr(self, f.name)
            if value is not None and not in_range(f, value):
                raise ValueError(f"{option_name(f)} must be {allowed_range(f)}, got {value!r}.")
        if self.prompt_format == "plain" and (self.system_prompt is not None or self.chat_template_args):
            raise ValueError("--system-prompt and --chat-template-arg apply to the chat format; drop them or use "
                             "--prompt-format chat (or auto).")
        if self.prompt_format == "plain" and not self.ou_chat_mask:
            raise ValueError("--no-ou-chat-mask applies to the chat format (the plain format never hides the pad "
                             "token); drop it or use --prompt-format chat (or auto).")
        check_template_args(self.chat_template_args)
        self.chat_template_args = {k: {"true": True, "false": False}.get(v, v) if isinstance(v, str) else v
                                   for k, v in self.chat_template_args.items()}
        if self.merge and not self.lora:
            raise ValueError("--merge only applies to LoRA runs; full fine-tuning already saves merged weights.")
        for key in ("eval_every", "select"):
            if getattr(self, key) is not None and not self.eval_tasks:
                raise ValueError(f"--{key.replace('_', '-')} needs --eval-tasks (the lm-eval tasks to run during "
                                 f"training), e.g. --eval-tasks tofu_forget10 --eval-every 10.")
        if self.select_if and self.select is None:
            raise ValueError("--select-if needs --select (it restricts which evaluated steps --select may choose).")
        if self.select is not None and self.eval_every is None:
            raise ValueError("--select needs --eval-every STEPS: it picks the best of the evaluations made during "
                             "training.")
        own = {f.name for f in dataclasses.fields(self.source.Options)}
        for f in source_fields().values():  # another source's option, given: it would be ignored (and saved)
            if f.name not in own and getattr(self, f.name) != _default(f):
                owners = [s.name for s in SOURCES if f.name in {g.name for g in dataclasses.fields(s.Options)}]
                raise ValueError(f"{option_name(f)} applies to --data {' / '.join(owners)} only, not --data "
                                 f"{self.data}; leave it out.")
        self.method_params = coerce_method_params(self.method, self.method_params)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunConfig) and self.to_dict() == other.to_dict()

    def __getattr__(self, name: str) -> Any:
        """A data source's option (:attr:`DataSource.Options`): its value, or its default when not given."""
        f = source_fields().get(name)
        if f is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return self.__dict__.setdefault("_source_values", {}).get(name, _default(f))

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in _CORE and name in source_fields():
            self.__dict__.setdefault("_source_values", {})[name] = value
        else:
            super().__setattr__(name, value)

    @property
    def options(self) -> Any:
        """The run's data source options (an instance of its ``Options``)."""
        return self.source.Options(**{f.name: getattr(self, f.name) for f in dataclasses.fields(self.source.Options)})

    def to_dict(self) -> dict[str, Any]:
        """Every option, the data sources' too (the keys of the saved ``unlearn_config.yaml``, as before they were
        declared on the sources, so older runs' configurations still load and resume)."""
        values: dict[str, Any] = {}
        for key, value in dataclasses.asdict(self).items():
            values[key] = value
            if key == "data":  # the sources' options after --data, as the saved files had them
                values.update({name: copy.deepcopy(getattr(self, name)) for name in source_fields()})
        return values

    def save(self, path: str | Path) -> None:
        Path(path).write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))


def option_name(f: dataclasses.Field) -> str:
    """How messages name a run option: its flag, or ``--`` + its name with dashes (YAML-only and inverted ones)."""
    flag = f.metadata.get("flag")
    return flag if flag and not f.metadata.get("inverted") else "--" + f.name.replace("_", "-")


def allowed_range(f: dataclasses.Field) -> str:
    """A run option's declared range in words: ``positive``, ``a positive number of documents``, ``in [0, 1)``,
    ``>= 0`` or ``one of ...``."""
    bounds, choices = f.metadata["bounds"], f.metadata["choices"]
    if choices:
        return "one of " + ", ".join(map(str, choices))
    if bounds == {"gt": 0}:
        return f"a positive number of {f.metadata['unit']}" if f.metadata.get("unit") else "positive"
    if set(bounds) == {"ge", "lt"}:
        return f"in [{bounds['ge']}, {bounds['lt']})"
    return " and ".join(f"{op} {bounds[key]}" for key, op in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="))
                        if key in bounds)


#: Options that must be equal for ``--resume`` to continue a run (epochs may grow; where output goes may change).
_CORE = frozenset(f.name for f in dataclasses.fields(RunConfig))
_dataclass_init = RunConfig.__init__


def _init(self: RunConfig, *args: Any, **values: Any) -> None:
    """RunConfig's fields, and the data sources' options given by name (``RunConfig(data="rwku", rwku_target=[...])``)."""
    own = {k: values.pop(k) for k in list(values) if k not in _CORE and k in source_fields()}
    _dataclass_init(self, *args, **values)
    for key, value in own.items():
        setattr(self, key, value)


RunConfig.__init__ = _init  # type: ignore[method-assign]


def _default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def source_fields() -> dict[str, dataclasses.Field]:
    """Every registered data source's options (:attr:`DataSource.Options`), by name; each help begins with the
    source it applies to (``With --data clear: ...``), unless it names a narrower condition itself (``With
    --rwku-corpus generated: ...``)."""
    return {f.name: _for_source(f, s.name) for s in reversed(SOURCES) for f in dataclasses.fields(s.Options)}


def _for_source(f: dataclasses.Field, source: str) -> dataclasses.Field:
    """``f`` with ``With --data SOURCE:`` before its help (a copy: the declaration stays as written)."""
    if f.metadata["help"].startswith("With --"):
        return f
    text = f.metadata["help"]
    f = copy.copy(f)
    f.metadata = types.MappingProxyType({**f.metadata, "help": f"With --data {source}: {text[:1].lower()}{text[1:]}"})
    return f


def run_fields() -> list[dataclasses.Field]:
    """Every `unlearn run` option: RunConfig's fields, then the data sources' (flags, config keys, checks)."""
    return [*dataclasses.fields(RunConfig), *(f for f in source_fields().values() if f.name not in _CORE)]


def run_hints() -> dict[str, Any]:
    """The declared type of every option of :func:`run_fields`."""
    hints = {}
    for source in reversed(SOURCES):
        hints.update(typing.get_type_hints(source.Options))
    return {**hints, **typing.get_type_hints(RunConfig)}


RESUME_KEYS = tuple(f.name for f in run_fields() if f.metadata["resume"])
#: Options holding local paths (saved relative to the checkpoint folder).
PATH_KEYS = tuple(f.name for f in run_fields() if f.metadata["path"])
#: The path option the run writes (its checkpoint folder); the other path options are read (the output guard of
#: ``unlearn run`` compares them).
OUTPUT_KEY = "out"


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
    from unlearn_methods import all_methods, check_method

    key = check_method(method)  # the name is checked before the classes (torch) are imported
    cls = all_methods()[key]
    return cls.Params.from_dict(params, cls.name).to_dict()


def read_config_file(path: str | Path, what: str = "config file") -> dict[str, Any]:
    """The options of a ``--config`` YAML file (or a saved ``unlearn_config.yaml``), read by the one settings reader
    (:mod:`unlearn_tasks.settings`: duplicate keys, non-UTF-8 bytes, alias bombs refused; YAML 1.2 numbers), each
    known and of its declared type and range, else a :class:`~unlearn_tasks.settings.SettingsError`
    ``FILE:LINE: key: what to fix``."""
    doc = read_settings(path, what)
    if doc.data is None:
        return {}
    if not isinstance(doc.data, dict):
        raise SettingsError(doc.where, "expected a mapping of option names to values (lr: 1e-5, epochs: 3, ...)")
    fields = {f.name: f for f in run_fields()}
    hints = run_hints()
    for key, value in doc.data.items():
        f = fields.get(key)
        if f is None:
            close = difflib.get_close_matches(str(key), fields, n=1)
            raise doc.error(str(key), f"unknown option{f' (did you mean {close[0]}?)' if close else ''}; the "
                            f"options are {', '.join(fields)}")
        if value is None:
            continue
        try:
            value = coerce(value, hints[key], key)
        except ValueError as e:
            raise doc.error(key, str(e).removeprefix(f"{key} ").rstrip(".")) from None
        if not isinstance(value, (list, dict)) and not in_range(f, value):
            raise doc.error(key, f"must be {allowed_range(f)}, got {value!r}")
    return dict(doc.data)


def load_run_config(path: str | Path | None = None, params: dict[str, Any] | None = None,
                    **overrides: Any) -> RunConfig:
    """A RunConfig from a YAML file (optional) with ``overrides`` (e.g. command-line options) on top; ``params``
    (``--param KEY=VALUE``) go over the file's ``method_params``. Raises ValueError naming what to fix."""
    values: dict[str, Any] = {}
    if path:
        values.update(read_config_file(path))
    values.update({k: v for k, v in overrides.items() if v is not None})
    if params:
        if not isinstance(values.get("method_params", {}), dict):
            raise ValueError(f"method_params in {path} must be a mapping.")
        values["method_params"] = {**values.get("method_params", {}), **params}
    known = {f.name for f in run_fields()}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"Unknown option(s) {unknown} in {path or 'the command line'}; known: {sorted(known)}.")
    cfg = RunConfig(**values)
    cfg.validate()
    if overrides.get("ou_chat_mask") is True and cfg.prompt_format == "plain":  # given, not the default
        raise ValueError("--ou-chat-mask applies to the chat format (the plain format never hides the pad token); drop "
                         "it or use --prompt-format chat (or auto).")
    return cfg
