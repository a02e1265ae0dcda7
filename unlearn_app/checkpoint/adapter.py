"""A LoRA adapter folder (``unlearn run``'s default output) loaded on its base model: the one place that reads
``adapter_config.json`` and turns it into lm-eval model arguments for either backend (``unlearn ci``,
``unlearn margins``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


class AdapterError(ValueError):
    """An adapter folder that cannot be loaded; the message says why."""


@dataclass(frozen=True)
class Adapter:
    """A LoRA adapter folder, its base model (Hub id or folder) and its rank."""

    path: str
    base: str
    rank: int

    def model_args(self, backend: str = "hf") -> dict[str, Any]:
        """lm-eval model arguments loading the adapter on its base: ``peft=`` for hf; vLLM takes
        ``lora_local_path`` and needs ``max_lora_rank`` at least the adapter's rank (a power of two from 8)."""
        if backend != "vllm":
            return {"pretrained": self.base, "peft": self.path}
        rank = 8
        while rank < self.rank:
            rank *= 2
        return {"pretrained": self.base, "lora_local_path": self.path, "max_lora_rank": rank}


def find_adapter(model: str | Path) -> Adapter | None:
    """The adapter in folder ``model``, or None when ``model`` is a full model (a folder without
    ``adapter_config.json``, or a Hub id). :class:`AdapterError` when the config is not a JSON object naming its base
    model with a whole-number rank."""
    path = Path(model).expanduser()
    config = path / "adapter_config.json"
    if not (path.is_dir() and config.is_file()):
        return None
    from harness_ext.results import read_json_file

    data = read_json_file(config, AdapterError, "adapter config", "PEFT's save_pretrained")
    base = data.get("base_model_name_or_path") if isinstance(data, dict) else None
    if not base or not isinstance(base, str):
        raise AdapterError(f"{config} names no base_model_name_or_path; cannot load the adapter")
    rank = 8 if data.get("r") is None else data["r"]  # PEFT's default rank when the file names none
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise AdapterError(f"{config}: \"r\" (the LoRA rank) is {rank!r}; it must be a whole number of at least 1, "
                           "as PEFT's save_pretrained writes it")
    return Adapter(str(path), base, rank)
