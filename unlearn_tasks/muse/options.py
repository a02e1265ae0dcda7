"""The switches of a MUSE evaluation, read from the task's metadata (YAML ``metadata`` + ``--metadata``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from unlearn_tasks.classifier import chosen_classifier, option_checks
from unlearn_tasks.metadata import MetadataOptions, per_key
from unlearn_tasks.muse.corpora import HUB_IDS, PARTS
from unlearn_tasks.settings import param


@dataclass
class MuseOptions(MetadataOptions):
    WHERE = "MUSE task"
    DERIVED = frozenset({"tokenizer", "tokenizer_kwargs"})

    corpus: str = param("news", "the corpus (set by each task YAML)", choices=tuple(HUB_IDS))
    dataset_path: str | None = param(None, "another Hub id in MUSE's layout")
    data_dir: str | dict[str, str] | None = param(None, "a local copy, or {\"news\": DIR, \"books\": DIR} for the group")
    muse_data_dir: str | dict[str, str] | None = param(
        None, "wins over data_dir, so TOFU's and MUSE's copies can live apart in one invocation")
    reference: str | float | dict[str, Any] | None = param(
        None, "the retrained model's run (a results folder or file, or an open-unlearning MUSE_EVAL.json), "
        "\"published\", or its Min-K% AUROC; or {corpus: ...}: PrivLeak")
    parts: list[str] = param(list(PARTS), "what to evaluate", choices=PARTS)
    mia_k: float = param(0.4, "fraction of tokens for Min-K% and Min-K%++", gt=0, le=1)
    verbmem_max_tokens: int = param(128, "VerbMem's generated tokens and reference tokens", ge=1)
    knowmem_max_tokens: int = param(32, "KnowMem's generated tokens", ge=1)
    max_items_per_split: int | None = param(None, "keep the first N items of every set", ge=1)
    mia_gradnorm: bool = param(False, "open-unlearning's GradNorm MIA on the PrivLeak passages (hf only)")
    mia_reference: bool = param(False, "open-unlearning's reference MIA (needs a reference run that logged per-item "
                                "losses)")
    gibberish: bool | str = param(
        False, "open-unlearning's gibberish metric: a classifier's class-0 probability of the forget VerbMem "
        "generations; true: open-unlearning's classifier, or a folder / Hub id")
    tokenizer: str | None = None
    tokenizer_kwargs: dict[str, Any] = field(default_factory=dict)

    def complete(self, metadata: dict[str, Any]) -> None:
        tokenizer = metadata.get("tokenizer") or metadata.get("pretrained")
        self.tokenizer = tokenizer if isinstance(tokenizer, str) else None
        self.tokenizer_kwargs = {k: metadata[k] for k in ("revision", "trust_remote_code") if metadata.get(k) is not None}

    def validate(self) -> None:
        checks = option_checks(self.gibberish)  # the rest come from the fields' declarations
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
