"""The switches of a WaterDrum evaluation, read from the task's metadata (YAML ``metadata`` + ``--metadata``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from unlearn_tasks.metadata import MetadataOptions, check_positive_int
from unlearn_tasks.waterdrum.data import AX_HUB_ID, SPLITS, TOFU_HUB_ID

BENCHMARKS = {"ax": AX_HUB_ID, "tofu": TOFU_HUB_ID}
PARTS = ("watermark", "rouge", "knowmem", "mia")


@dataclass
class WaterDrumOptions(MetadataOptions):
    """Options of ``waterdrum_ax`` / ``waterdrum_tofu`` (all settable with ``--metadata``)."""

    WHERE = "WaterDrum task"
    DERIVED = frozenset({"model_tokenizer"})
    COMMA_LISTS = frozenset({"splits", "parts"})

    benchmark: str = "ax"
    config: str = "forget_01"
    dataset_path: str | None = None
    data_dir: str | None = None
    waterdrum_data_dir: str | None = None
    splits: list[str] = field(default_factory=lambda: ["retain", "forget"])
    duplicate_owner: int | None = None
    owners: int = 20
    generations: int = 10
    prompt_tokens: int = 50
    prompt_tokenizer: str | None = None
    verify_tokenizer: str | None = None
    verify_vocab_size: int | None = None
    ids: str | list[int] | None = None
    k_p: int = 1
    workers: int | None = None
    parts: list[str] = field(default_factory=lambda: list(PARTS))
    knowmem_split: str = "watermarked"
    knowmem_max_tokens: int = 32
    mia_k: float = 0.4
    max_items_per_split: int | None = None
    model_tokenizer: str | None = None  # from lm-eval's model args (tokenizer= or pretrained=)

    def complete(self, metadata: dict[str, Any]) -> None:
        model_tok = metadata.get("tokenizer") or metadata.get("pretrained")
        self.model_tokenizer = model_tok if isinstance(model_tok, str) else None
        if self.duplicate_owner is None and self.benchmark == "tofu":
            self.duplicate_owner = 0  # WaterDrum-TOFU's duplicates sit in the retain set (owner 0)

    @property
    def repo_id(self) -> str:
        return self.dataset_path or BENCHMARKS[self.benchmark]

    @property
    def local_dir(self) -> str | None:
        return self.waterdrum_data_dir or self.data_dir

    def validate(self) -> None:
        check_positive_int(self.max_items_per_split, "max_items_per_split", "WaterDrum task option")
        dup = [s for s in self.splits if s not in ("retain", "forget")]
        checks = [
            (self.benchmark in BENCHMARKS, f"benchmark must be one of {sorted(BENCHMARKS)}"),
            (bool(self.splits) and set(self.splits) <= set(SPLITS) - {"full"},
             f"splits must be a non-empty subset of {[s for s in SPLITS if s != 'full']}"),
            (not dup or self.duplicate_owner is not None,
             f"splits {dup} need duplicate_owner (the owner id the duplicates were watermarked with)"),
            (isinstance(self.generations, int) and self.generations >= 1, "generations must be an int >= 1"),
            (isinstance(self.prompt_tokens, int) and self.prompt_tokens >= 1, "prompt_tokens must be an int >= 1"),
            (isinstance(self.owners, int) and self.owners >= 1, "owners must be an int >= 1"),
            (bool(self.parts) and set(self.parts) <= set(PARTS) and "watermark" in self.parts,
             f"parts must be a subset of {PARTS} that includes 'watermark'"),
            (0 < self.mia_k <= 1, "mia_k must be in (0, 1]"),
            (isinstance(self.knowmem_max_tokens, int) and self.knowmem_max_tokens >= 1, "knowmem_max_tokens must be >= 1"),
        ]
        self.require(checks)
