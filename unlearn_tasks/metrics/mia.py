"""Membership-inference scores over per-token log-probabilities, their AUROC, and PrivLeak.

Convention (open-unlearning's): every score is *loss-like*, higher = less likely a training member, and
AUROC puts the forget set as label 0 and the holdout (never trained) set as label 1. So AUROC near 1
means the forget set still looks memorised; 0.5 means forget and holdout are indistinguishable.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np


def loss_score(token_logprobs: Sequence[float]) -> float:
    """LOSS attack: average negative log-likelihood of the scored tokens."""
    return float(-np.mean(np.asarray(token_logprobs, dtype=np.float64)))


def zlib_score(token_logprobs: Sequence[float], text: str) -> float:
    """zlib attack (Carlini et al. 2021): average loss divided by the zlib-compressed length of the text in bytes."""
    return loss_score(token_logprobs) / len(zlib.compress(text.encode("utf-8")))


def _lowest_k_mean(values: np.ndarray, k: float) -> float:
    n = max(1, int(k * values.size))
    return float(np.sort(values)[:n].mean())


def min_k_score(token_logprobs: Sequence[float], k: float = 0.4) -> float:
    """Min-K% (Shi et al. 2024): minus the mean of the lowest ``k`` fraction of token log-probs (at least one)."""
    lp = np.asarray(token_logprobs, dtype=np.float64)
    return -_lowest_k_mean(lp, k)


def min_k_plus_plus_score(
    token_logprobs: Sequence[float],
    vocab_mean: Sequence[float],
    vocab_var: Sequence[float],
    k: float = 0.4,
    var_floor: float = 0.0,
) -> float:
    """Min-K%++ (Zhang et al. 2024): per-token z-scores ``(log p - mu) / sigma`` under the model's own next-token
    distribution (``mu = E[log p]``, ``sigma^2 = Var[log p]``), then minus the mean of the lowest ``k`` fraction.

    ``var_floor`` clamps ``sigma^2`` from below (open-unlearning uses 1e-6); 0 keeps the exact variance."""
    lp = np.asarray(token_logprobs, dtype=np.float64)
    mu = np.asarray(vocab_mean, dtype=np.float64)
    sd = np.sqrt(np.maximum(np.asarray(vocab_var, dtype=np.float64), var_floor))
    z = (lp - mu) / np.where(sd > 0, sd, 1e-12)
    return -_lowest_k_mean(z, k)


def mia_auroc(forget_scores: Sequence[float], holdout_scores: Sequence[float]) -> float:
    """AUROC with forget = 0 and holdout = 1 over loss-like scores; NaN when a population is empty or any score is NaN."""
    f = np.asarray(forget_scores, dtype=np.float64)
    h = np.asarray(holdout_scores, dtype=np.float64)
    if f.size == 0 or h.size == 0 or np.isnan(f).any() or np.isnan(h).any():
        return float("nan")
    from sklearn.metrics import roc_auc_score  # imported here: scikit-learn takes about a second to import

    labels = np.concatenate([np.zeros(f.size), np.ones(h.size)])
    return float(roc_auc_score(labels, np.concatenate([f, h])))


def privleak(auc: float, reference_auc: float) -> float:
    """PrivLeak (MUSE, as open-unlearning computes it): ``((1-AUC) - (1-AUC_ref)) / (1-AUC_ref) * 100``.

    About 0 is ideal; strongly negative means the forget set is still recognisable (under-unlearning).
    """
    denom = 1.0 - reference_auc
    if denom == 0:
        return float("nan")
    return float(((1.0 - auc) - denom) / denom * 100.0)
