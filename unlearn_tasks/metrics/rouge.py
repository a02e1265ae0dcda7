"""ROUGE as the benchmarks score generations: rouge-score with the Porter stemmer (TOFU, open-unlearning), or
without it (MUSE's own code)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where a scorer is built: rouge-score imports nltk (about a second)
    from rouge_score import rouge_scorer


@lru_cache(maxsize=1)
def _scorer() -> rouge_scorer.RougeScorer:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True)


def rouge_l_recall(reference: str, generation: str, use_stemmer: bool = True) -> float:
    """ROUGE-L recall of ``generation`` against ``reference`` (TOFU's reported ROUGE; unstemmed on request)."""
    scorer = _scorer() if use_stemmer else _unstemmed_scorer()
    return float(scorer.score(reference, generation)["rougeL"].recall)


@lru_cache(maxsize=1)
def _unstemmed_scorer() -> rouge_scorer.RougeScorer:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)


def rouge_l_f1(reference: str, generation: str, use_stemmer: bool = False) -> float:
    """ROUGE-L F1 of ``generation`` against ``reference``; MUSE scores VerbMem and KnowMem this way, unstemmed."""
    scorer = _scorer() if use_stemmer else _unstemmed_scorer()
    return float(scorer.score(reference, generation)["rougeL"].fmeasure)


def rouge_scores(reference: str, generation: str) -> dict[str, float]:
    """ROUGE-1 recall, ROUGE-L recall and ROUGE-L F1 in one pass."""
    s = _scorer().score(reference, generation)
    return {"rouge1_recall": s["rouge1"].recall, "rougeL_recall": s["rougeL"].recall, "rougeL_f1": s["rougeL"].fmeasure}
