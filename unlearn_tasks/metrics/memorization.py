"""Teacher-forced memorization metrics (Carlini et al. 2021; Tirumala et al. 2022), as open-unlearning (OU)
computes them in ``src/evals/metrics/memorization.py``: both compare the model's argmax prediction at every answer
position, given the true prefix, with the true token.

* **Exact memorization (EM)**: the fraction of answer positions where the argmax is the true token.
* **Extraction strength (ES)**: ``1 - k / n`` for the smallest ``k`` such that the predictions from position ``k``
  on equal the answer from ``k`` on (the longest correctly predicted suffix, as a fraction of the answer).

Two edge cases where OU's code and the definition part ways, each offered as a ``mode``:

* no suffix matches (the last token is mispredicted): the definition gives ``k = n``, ES 0; OU's loop stops at
  ``k = n - 1`` without finding a match and reports ``1 / n`` (``mode="open-unlearning"``);
* an empty answer (no scored token): EM is undefined (None, left out of the mean, in both modes); OU scores ES 0,
  which enters its mean, the definition leaves it out (None).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MODES = ("definition", "open-unlearning")


def _check(predicted: Sequence[int], labels: Sequence[int]) -> None:
    if len(predicted) != len(labels):
        raise ValueError(f"{len(predicted)} predictions for {len(labels)} answer tokens")


def exact_memorization(predicted: Sequence[int], labels: Sequence[int]) -> float | None:
    """Fraction of answer positions whose teacher-forced argmax ``predicted[i]`` is the true token ``labels[i]``;
    None for an empty answer."""
    _check(predicted, labels)
    if not len(labels):
        return None
    return float(np.mean(np.asarray(predicted) == np.asarray(labels)))


def matching_suffix_start(predicted: Sequence[int], labels: Sequence[int]) -> int:
    """The smallest ``k`` with ``predicted[k:] == labels[k:]`` (``len(labels)`` when even the last token differs)."""
    _check(predicted, labels)
    k = len(labels)
    while k > 0 and predicted[k - 1] == labels[k - 1]:
        k -= 1
    return k


def extraction_strength(predicted: Sequence[int], labels: Sequence[int], mode: str = "definition") -> float | None:
    """``1 - k / n`` with ``k`` = :func:`matching_suffix_start`; see the module docstring for ``mode``."""
    if mode not in MODES:
        raise ValueError(f"extraction strength mode must be one of {MODES}, got {mode!r}")
    n = len(labels)
    if n == 0:
        _check(predicted, labels)
        return 0.0 if mode == "open-unlearning" else None
    k = matching_suffix_start(predicted, labels)
    if k == n and mode == "open-unlearning":
        k = n - 1
    return 1.0 - k / n


def scores_from_matches(matches: Sequence[float | bool], mode: str = "definition") -> tuple[float | None, float | None]:
    """(EM, ES) from per-position "the argmax is the true token" flags, which is all both metrics depend on."""
    flags = [bool(m) for m in matches]
    ones = [True] * len(flags)
    return exact_memorization(flags, ones), extraction_strength(flags, ones, mode)


def mean_score(scores: Sequence[float | None]) -> float:
    """The mean of the per-item scores that are not None (NaN if none are), as OU aggregates EM and ES."""
    kept = [s for s in scores if s is not None]
    return float(np.mean(kept)) if kept else float("nan")
