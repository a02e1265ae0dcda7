"""The switches of a MUSE evaluation, read from the task's metadata (YAML ``metadata`` + ``--metadata``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from unlearn_tasks.classifier import chosen_classifier, option_checks
from unlearn_tasks.metadata import MetadataOptions, per_key
from unlearn_tasks.muse.corpora import HUB_IDS, PARTS


@dataclass
class MuseOptions(MetadataOptions):
    WHERE = "MUSE task"
    DERIVED = frozenset({"tokenizer", "tokenizer_kwargs"})

    corpus: str = "news"
    dataset_path: str | None = None  # another Hub id in MUSE's layout
    data_dir: str | dict[str, str] | None = None  # local copy (or {"news": DIR, "books": DIR})
    muse_data_dir: str | dict[str, str] | None = None  # wins over data_dir, so TOFU's and MUSE's copies can live apart
    reference: str | float | dict[str, Any] | None = None  # retrained model's run, "published", or an AUROC
    parts: list[str] = field(default_factory=lambda: list(PARTS))
    mia_k: float = 0.4
    verbmem_max_tokens: int = 128
    knowmem_max_tokens: int = 32
    max_items_per_split: int | None = None
    #: open-unlearning's optional MUSE metrics (off by default, as in its muse.yaml): the GradNorm MIA on the PrivLeak
    #: passages (hf only), the reference MIA (needs a reference run that logged per-item losses) and gibberish
    #: (a classifier's class-0 probability of the forget VerbMem generations; true: OU's classifier, or a folder / id).
    mia_gradnorm: bool = False
    mia_reference: bool = False
    gibberish: bool | str = False
    tokenizer: str | None = None  # for VerbMem's 128-token reference (default: the model's, from pretrained=)
    tokenizer_kwargs: dict[str, Any] = field(default_factory=dict)

    def complete(self, metadata: dict[str, Any]) -> None:
        tokenizer = metadata.get("tokenizer") or metadata.get("pretrained")
        self.tokenizer = tokenizer if isinstance(tokenizer, str) else None
        self.tokenizer_kwargs = {k: metadata[k] for k in ("revision", "trust_remote_code") if metadata.get(k) is not None}

    def validate(self) -> None:
        checks = [
            (self.corpus in HUB_IDS, f"corpus must be one of {sorted(HUB_IDS)}"),
            (bool(self.parts) and set(self.parts) <= set(PARTS), f"parts must be a non-empty subset of {PARTS}"),
            (0 < self.mia_k <= 1, "mia_k must be in (0, 1]"),
            (self.verbmem_max_tokens >= 1 and self.knowmem_max_tokens >= 1, "verbmem/knowmem_max_tokens must be >= 1"),
            (self.max_items_per_split is None or self.max_items_per_split >= 1, "max_items_per_split must be >= 1"),
            (isinstance(self.mia_gradnorm, bool), "mia_gradnorm must be true or false"),
            (isinstance(self.mia_reference, bool), "mia_reference must be true or false"),
            *option_checks(self.gibberish),
        ]
        self.require(checks)

    def gibberish_classifier(self) -> str | None:
        """The classifier of the gibberish metric, None when it is off."""
        return chosen_classifier(self.gibberish)

    @property
    def repo_id(self) -> str:
        return per_key(self.dataset_path, self.corpus) or HUB_IDS[self.corpus]

    @property
    def local_dir(self) -> str | None:
        return per_key(self.muse_data_dir, self.corpus) or per_key(self.data_dir, self.corpus)

    @property
    def reference_for_corpus(self) -> str | float | None:
        return per_key(self.reference, self.corpus)
