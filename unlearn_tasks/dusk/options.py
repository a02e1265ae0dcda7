"""The switches of a DUSK evaluation, read from the task's metadata (YAML ``metadata`` + ``--metadata``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from unlearn_tasks.metadata import MetadataOptions
from unlearn_tasks.settings import param

HUB_ID = "AI-ISL/DUSK"
#: the measures, one task each: verbatim memorisation, unique forget / shared / unique retain knowledge, and the
#: membership-inference pair (privacy leakage and retain deviation, computed from the same passages)
SETS = ("verbatim", "forget_qa", "shared_qa", "retain_qa", "privacy")


@dataclass
class DuskOptions(MetadataOptions):
    WHERE = "DUSK task"
    DERIVED = frozenset({"tokenizer", "tokenizer_kwargs"})

    dusk_set: str = param(None, "which measure the task evaluates (set by each task YAML)", choices=SETS,
                          required=True)
    dataset_path: str | None = param(None, "another Hub id in DUSK's layout")
    data_dir: str | None = param(None, "a local copy: the Hub's layout (README configs, <config>-*.parquet, raw/) "
                                 "or the GitHub release's data/Prof/ (or a clone of the repository)")
    dusk_data_dir: str | None = param(None, "wins over data_dir, so another benchmark's copy can live apart")
    dusk_reference: str | dict[str, float] | None = param(
        None, "the retrained model's AUROCs that privleak and retain_deviation are relative to: the output folder "
        "(or results file) of a dusk_privacy run on that model, or {\"auc_forget_holdout\": x, "
        "\"auc_holdout_retain\": y}")
    dusk_verbatim_max_tokens: int = param(128, "new tokens per verbatim continuation, and the reference's length in "
                                          "tokens (the release's 128)", ge=1)
    dusk_qa_max_tokens: int = param(32, "new tokens per QA answer (the release's 32)", ge=1)
    dusk_mia_window: int = param(1024, "tokens per membership-inference passage: each text is cut into whole "
                                 "windows of this many tokens (the release's 1024)", ge=2)
    dusk_mia_k: float = param(0.4, "Min-K%++ fraction (the release's privleak and retain deviation use 40%)",
                              gt=0, le=1)
    max_items_per_split: int | None = param(None, "at most this many items per set (smoke runs)", ge=1)
    tokenizer: str | None = None  # for the verbatim reference's first tokens and the MIA windows (the model's)
    tokenizer_kwargs: dict[str, Any] | None = None

    def complete(self, metadata: dict[str, Any]) -> None:
        tokenizer = metadata.get("tokenizer") or metadata.get("pretrained")
        self.tokenizer = tokenizer if isinstance(tokenizer, str) else None
        self.tokenizer_kwargs = {k: metadata[k] for k in ("revision", "trust_remote_code") if metadata.get(k) is not None}

    @property
    def repo_id(self) -> str:
        return self.dataset_path or HUB_ID

    @property
    def local_dir(self) -> str | None:
        return self.dusk_data_dir or self.data_dir
