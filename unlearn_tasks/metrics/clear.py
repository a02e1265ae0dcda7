"""CLEAR's metric maths that differ from TOFU's (the shared ones, Truth Ratio statistics, Forget Quality and Model
Utility, are :mod:`unlearn_tasks.metrics.tofu`).

The release (``mm/calculate_metrics.py``) computes the truth ratio of item i as
``exp(mean over ALL items and perturbations of the perturbed loss - paraphrased loss_i)``: one global perturbed
term per evaluation set instead of each item's own perturbed answers. :func:`release_truth_ratios` reproduces that
(parity mode); the default is TOFU's per-item ratio.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from unlearn_tasks.metrics.tofu import model_utility


def release_truth_ratios(paraphrased_mean_logprobs: Sequence[float],
                         perturbed_mean_logprobs: Sequence[Sequence[float]]) -> list[float]:
    """Per-item ``R_i = exp(mean_all(perturbed) - paraphrased_i)`` in log-probability terms (= P(pert)/P(para) with
    the perturbed probability pooled over the whole set), as CLEAR's release computes it."""
    pooled = [v for item in perturbed_mean_logprobs for v in item]
    if not pooled:
        return [float("nan")] * len(paraphrased_mean_logprobs)
    mean_pert = float(np.mean(np.asarray(pooled, dtype=np.float64)))
    return [float(np.exp(mean_pert - p)) for p in paraphrased_mean_logprobs]


def domain_score(values: Sequence[float]) -> float:
    """A domain summary (Real, Retain, Forget): the harmonic mean of its metrics, as Model Utility is built."""
    return model_utility(values)
