"""The switches of a WaterDrum evaluation, read from the task's metadata (YAML ``metadata`` + ``--metadata``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from unlearn_tasks.metadata import MetadataOptions
from unlearn_tasks.settings import param
from unlearn_tasks.waterdrum.data import AX_HUB_ID, SPLITS, TOFU_HUB_ID

BENCHMARKS = {"ax": AX_HUB_ID, "tofu": TOFU_HUB_ID}
PARTS = ("watermark", "rouge", "knowmem", "mia")


@dataclass
class WaterDrumOptions(MetadataOptions):
    WHERE = "WaterDrum task"
    DERIVED = frozenset({"model_tokenizer"})
    COMMA_LISTS = frozenset({"splits", "parts"})

    benchmark: str = param("ax", "ax: WaterDrum-Ax (arXiv abstracts); tofu: WaterDrum-TOFU (set by each task YAML)",
                           choices=tuple(BENCHMARKS))
    config: str = param("forget_01", "the dataset config, e.g. forget_05 or unwatermarked_forget_01")
    dataset_path: str | None = param(None, "another Hub id with the same layout")
    data_dir: str | None = param(None, "a local copy in the Hub's layout")
    waterdrum_data_dir: str | None = param(None, "wins over data_dir, so TOFU's and WaterDrum's copies can live "
                                           "apart")
    splits: list[str] = param(["retain", "forget"], "the splits to verify (text \"a, b\" works too); "
                              "exact_duplicate / semantic_duplicate need duplicate_owner", choices=SPLITS[1:])
    duplicate_owner: int | None = param(None, "the owner id the duplicates were watermarked with (default 0 on "
                                        "WaterDrum-TOFU, whose duplicates sit in the retain set)")
    owners: int = param(20, "WaterDrum-Ax's owners when the data has no integer owner column (the rows are in "
                        "equal owner blocks)", ge=1)
    generations: int = param(10, "sampled continuations per prompt", ge=1)
    prompt_tokens: int = param(50, "tokens of each text the prompt keeps", ge=1)
    prompt_tokenizer: str | None = param(None, "the tokenizer that cuts the prompts (default: the model's, from "
                                         "pretrained= / tokenizer=)")
    verify_tokenizer: str | None = param(None, "the verification tokenizer (default: Llama-3's; any Hugging Face name "
                                         "or folder)")
    verify_vocab_size: int | None = param(None, "the vocabulary the watermark keys span (default: that tokenizer's "
                                          "base vocabulary, 128000 for Llama-3)", ge=1)
    ids: str | list[int] | None = param(None, "owner ids to verify with, e.g. \"0-19\" or a list (default: the owners "
                                        "in the data)")
    k_p: int = param(1, "the watermark's perturbation key", ge=1)
    workers: int | None = param(None, "verification processes", ge=1)
    parts: list[str] = param(list(PARTS), "what to evaluate (text \"a, b\" works too); it must include "
                             "watermark", choices=PARTS)
    knowmem_split: str = param("watermarked", "the split of the KnowMem questions")
    knowmem_max_tokens: int = param(32, "KnowMem's generated tokens", ge=1)
    mia_k: float = param(0.4, "fraction of tokens for Min-K% and Min-K%++", gt=0, le=1)
    max_items_per_split: int | None = param(None, "keep the first N texts of every split", ge=1)
    model_tokenizer: str | None = None

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
        dup = [s for s in self.splits if s in ("exact_duplicate", "semantic_duplicate")]
        checks = [  # what the fields' declarations do not say
            (not dup or self.duplicate_owner is not None,
             f"splits {dup} need duplicate_owner (the owner id the duplicates were watermarked with)"),
            ("watermark" in self.parts, f"parts must be a subset of {PARTS} that includes 'watermark'"),
        ]
        self.require(checks)
