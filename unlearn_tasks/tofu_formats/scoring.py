"""Per-document ReLU scores (pure functions of the model outputs).

- letter formats (MCQA, analogy MCQA, comprehension MCQA, odd-one-out): 1 if the highest-scoring letter is the
  gold one. The letters compared are the document's ``choices``: all of A-D in parity mode (the release takes
  the argmax over the four letter tokens whatever the number of shown options), the shown letters in default;
- cloze: the length-normalised probability of the blank, ``exp(mean token log-prob)``;
- analogy QA: ROUGE-L recall of the generation against the answer (as TOFU QA);
- comprehension QA: the mean of ROUGE-1, ROUGE-2 and ROUGE-L F1 (rouge-score, Porter stemmer).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # imported where the scorer is built: rouge-score imports nltk (about a second)
    from rouge_score import rouge_scorer

from unlearn_tasks.metrics.rouge import rouge_l_recall


def letter_accuracy(loglikelihoods: Sequence[float], gold: int) -> float:
    """1.0 if the argmax (first on ties) over the compared letters' log-likelihoods is ``gold``."""
    return float(int(np.argmax(np.asarray(loglikelihoods, dtype=np.float64))) == gold)


def cloze_probability(token_logprobs: Sequence[float]) -> float:
    """``(prod p_i)^(1/n)`` over the blank's tokens; NaN if there are none."""
    if len(token_logprobs) == 0:
        return float("nan")
    return float(math.exp(float(np.mean(np.asarray(token_logprobs, dtype=np.float64)))))


@lru_cache(maxsize=1)
def _scorer() -> rouge_scorer.RougeScorer:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)


def rouge_f1_mean(target: str, generation: str) -> float:
    """``(ROUGE-1 F + ROUGE-2 F + ROUGE-L F) / 3`` (F1 is symmetric, so argument order does not matter)."""
    s = _scorer().score(target, generation)
    return float((s["rouge1"].fmeasure + s["rouge2"].fmeasure + s["rougeL"].fmeasure) / 3)


def analogy_recall(target: str, generation: str) -> float:
    """ROUGE-L recall, TOFU's QA score."""
    return rouge_l_recall(target, generation)
