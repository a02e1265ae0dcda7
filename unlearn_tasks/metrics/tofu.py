"""TOFU metrics (Maini et al. 2024) as pure functions over per-token log-probabilities.

Every probability here is *length-normalised*: ``p = exp(mean token log-prob)`` over the scored answer
tokens, which is how legacy TOFU and open-unlearning compute ``exp(-avg_loss)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

TRUTH_RATIO_MEANS = ("geometric", "arithmetic")
#: open-unlearning's aggregations of per-item truth ratios (its ``truth_ratio`` metric's ``aggregator``).
TRUTH_RATIO_AGGREGATORS = ("closer_to_1_better", "true_better", "prob_mean")


def mean_logprob(token_logprobs: Sequence[float]) -> float:
    """Average log-probability of the scored tokens (= minus TOFU's ``avg_loss``); NaN if none."""
    if len(token_logprobs) == 0:
        return float("nan")
    return float(np.mean(np.asarray(token_logprobs, dtype=np.float64)))


def normalised_prob(token_logprobs: Sequence[float]) -> float:
    """Length-normalised answer probability ``P(a|q)^(1/|a|) = exp(mean log p)``."""
    return float(math.exp(mean_logprob(token_logprobs)))


def option_normalised_prob(correct: float, wrong: Sequence[float]) -> float:
    """Real-authors / world-facts probability: ``p_c / (p_c + sum p_wrong)`` over length-normalised probs."""
    return float(correct / (correct + float(np.sum(wrong)) + 1e-10))


def truth_ratio(
    paraphrased_mean_logprob: float,
    perturbed_mean_logprobs: Sequence[float],
    mean: str = "geometric",
) -> float:
    """Per-item Truth Ratio ``R = mean_j P(pert_j) / P(para)`` on length-normalised probabilities.

    ``mean="geometric"`` (default) averages the perturbed answers in log space, as the TOFU and
    open-unlearning code do; ``mean="arithmetic"`` is the TOFU paper's formula.
    """
    pert = np.asarray(perturbed_mean_logprobs, dtype=np.float64)
    if mean == "geometric":
        return float(np.exp(pert.mean() - paraphrased_mean_logprob))
    if mean == "arithmetic":
        return float(np.exp(pert).mean() / math.exp(paraphrased_mean_logprob))
    raise ValueError(f"truth ratio mean must be one of {TRUTH_RATIO_MEANS}, got {mean!r}")


def truth_ratio_forget_stat(ratios: Sequence[float]) -> float:
    """Forget-set statistic ``mean(min(R, 1/R))`` (closer to 1 is better)."""
    r = np.asarray(ratios, dtype=np.float64)
    return float(np.mean(np.minimum(r, 1.0 / r))) if r.size else float("nan")


def truth_ratio_retain_stat(ratios: Sequence[float]) -> float:
    """Retain / real-authors / world-facts statistic ``mean(max(0, 1 - R))`` (higher is better)."""
    r = np.asarray(ratios, dtype=np.float64)
    return float(np.mean(np.maximum(0.0, 1.0 - r))) if r.size else float("nan")


def truth_ratio_aggregate(ratios: Sequence[float], aggregator: str, eps: float = 0.0) -> float:
    """One of open-unlearning's aggregations of per-item truth ratios ``R = p_wrong / p_correct``:

    * ``closer_to_1_better``: ``mean(min(R, 1 / (R + eps)))`` (forget set; = :func:`truth_ratio_forget_stat` at eps 0);
    * ``true_better``: ``mean(max(0, 1 - R))`` (retain, real authors, world facts);
    * ``prob_mean``: ``mean(p_correct / (p_correct + p_wrong)) = mean(1 / (1 + R))`` (the OpenUnlearning paper's
      "extent of knowledge"; higher = more knowledge).

    ``eps`` is open-unlearning's 1e-10 guard in ``1 / (R + eps)``; NaN for no items.
    """
    r = np.asarray(ratios, dtype=np.float64)
    if not r.size:
        return float("nan")
    if aggregator == "closer_to_1_better":
        return float(np.mean(np.minimum(r, 1.0 / (r + eps))))
    if aggregator == "true_better":
        return float(np.mean(np.maximum(0.0, 1.0 - r)))
    if aggregator == "prob_mean":
        return float(np.mean(1.0 / (1.0 + r)))
    raise ValueError(f"truth ratio aggregator must be one of {TRUTH_RATIO_AGGREGATORS}, got {aggregator!r}")


def forget_quality(ratios: Sequence[float], reference_ratios: Sequence[float]) -> float:
    """Forget Quality: two-sided KS-test p-value between the model's and the retain model's forget-set truth ratios."""
    if len(ratios) == 0 or len(reference_ratios) == 0:
        return float("nan")
    from scipy import stats  # imported where used: scipy.stats takes about half a second to import

    return float(stats.ks_2samp(np.asarray(ratios), np.asarray(reference_ratios)).pvalue)


def model_utility(values: Sequence[float]) -> float:
    """Model Utility: harmonic mean of the 9 retain / real-authors / world-facts numbers.

    NaN if any value is NaN; 0 if any value is 0 (the harmonic mean's limit).
    """
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0 or np.isnan(v).any():
        return float("nan")
    if (v <= 0).any():
        return 0.0
    from scipy import stats

    return float(stats.hmean(v))
