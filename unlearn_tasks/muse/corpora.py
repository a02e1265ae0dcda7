"""MUSE's two corpora, the evaluation sets of one corpus (Hub config, split names, columns), and the published
retrained models' MIA AUROCs."""

from __future__ import annotations

from dataclasses import dataclass

HUB_IDS = {"news": "muse-bench/MUSE-News", "books": "muse-bench/MUSE-Books"}
PARTS = ("verbmem", "knowmem", "privleak")
QA = ("question", "answer")


@dataclass(frozen=True)
class MuseSet:
    """One evaluation set: its name (metric prefix), the part it belongs to, where it lives on the Hub."""

    name: str
    part: str
    config: str
    splits: tuple[str, ...]  # accepted split names, first found wins (the Hub renamed retain2_qa -> retain_qa)
    columns: tuple[str, ...]
    icl_splits: tuple[str, ...] = ()  # KnowMem: the few-shot examples


SETS = (
    MuseSet("verbmem_forget", "verbmem", "verbmem", ("forget",), ("prompt", "gt")),
    MuseSet("knowmem_forget", "knowmem", "knowmem", ("forget_qa",), QA, ("forget_qa_icl",)),
    MuseSet("knowmem_retain", "knowmem", "knowmem", ("retain_qa", "retain2_qa"), QA, ("retain_qa_icl", "retain2_qa_icl")),
    MuseSet("privleak_forget", "privleak", "privleak", ("forget",), ("text",)),
    MuseSet("privleak_holdout", "privleak", "privleak", ("holdout",), ("text",)),
)

#: Raw corpora for unlearning (``unlearn run --data muse_news``): config ``raw``; ``--forget``/``--retain`` name splits.
RAW_CONFIG = "raw"
DEFAULT_FORGET, DEFAULT_RETAIN = "forget", "retain1"

#: MUSE's published AUROCs of its retrained Llama-2-7B models (forget vs holdout, k = 0.4 for Min-K%), from the
#: release's constants, converted to this package's convention (forget = 0, holdout = 1, loss-like scores), which
#: is one minus MUSE's (``roc_curve(y, -score)``): e.g. News Min-40% 0.4772 there is 0.5228 here.
PUBLISHED_RETRAIN_AUC = {
    "news": {"mia_loss_auc": 1 - 0.4652, "mia_zlib_auc": 1 - 0.4328, "mia_min_k_auc": 1 - 0.4772},
    "books": {"mia_loss_auc": 1 - 0.4746, "mia_zlib_auc": 1 - 0.2773, "mia_min_k_auc": 1 - 0.5393},
}


def sets_for(parts: list[str]) -> list[MuseSet]:
    """The evaluation sets the given parts read."""
    return [s for s in SETS if s.part in parts]


def corpus_of(data: str) -> str | None:
    """``muse_news`` / ``muse-news`` / ``news`` / a MUSE Hub id -> ``news`` (or ``books``); None if not MUSE."""
    key = data.strip().lower()
    for corpus, hub_id in HUB_IDS.items():
        if key in (corpus, f"muse_{corpus}", f"muse-{corpus}", hub_id.lower()):
            return corpus
    return None
