"""The configuration of one unlearning run: every command-line option is also a key of a YAML config file."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from unlearn_tasks.tofu.splits import HUB_ID


@dataclass
class RunConfig:
    method: str = "npo"
    model: str = ""
    out: str = ""
    data: str = "tofu"  # "tofu" (= locuslab/TOFU), "demo" (embedded corpus), "evaldu" (data_dir = an Eval-DU folder) or a Hub id
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
    eval_tasks: list[str] = field(default_factory=list)
    eval_metadata: dict[str, Any] = field(default_factory=dict)
    push_to_hub: str | None = None
    hub_private: bool = True
    progress: bool = True

    @property
    def dataset(self) -> str:
        if self.data == "clear":
            from unlearn_tasks.clear.splits import HUB_ID as CLEAR_HUB_ID

            return CLEAR_HUB_ID
        return HUB_ID if self.data == "tofu" else self.data

    def validate(self) -> None:
        missing = [k for k in ("model", "out") if not getattr(self, k)]
        if missing:
            raise ValueError(f"Missing required option(s): {', '.join('--' + m for m in missing)}.")
        if self.data == "evaldu" and (self.evaldu_target is None or not self.data_dir):
            raise ValueError("--data evaldu needs --data-dir (an Eval-DU JSON folder) and --evaldu-target FACT_ID.")
        if self.modality not in ("text", "image", "both"):
            raise ValueError(f"--modality must be text, image or both, got {self.modality!r}.")
        if self.merge and not self.lora:
            raise ValueError("--merge only applies to LoRA runs; full fine-tuning already saves merged weights.")
        for key in ("epochs", "lr", "batch_size", "grad_accum", "max_length"):
            if getattr(self, key) <= 0:
                raise ValueError(f"--{key.replace('_', '-')} must be positive, got {getattr(self, key)}.")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))


def load_run_config(path: str | Path | None = None, **overrides: Any) -> RunConfig:
    """A RunConfig from a YAML file (optional) with ``overrides`` (e.g. command-line options) on top."""
    values: dict[str, Any] = {}
    if path:
        loaded = yaml.safe_load(Path(path).read_text()) or {}
        if not isinstance(loaded, dict):
            raise ValueError(f"{path}: expected a mapping of option names to values.")
        values.update(loaded)
    values.update({k: v for k, v in overrides.items() if v is not None})
    known = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"Unknown option(s) {unknown} in {path or 'the command line'}; known: {sorted(known)}.")
    cfg = RunConfig(**values)
    cfg.validate()
    return cfg
