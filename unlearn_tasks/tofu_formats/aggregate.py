"""Corpus-level ReLU numbers of a pair task: the forget and retain means and their gap.

Each document contributes ``(role, score)`` with role ``forget`` or ``retain``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

NAN = float("nan")


def role_mean(items: Sequence[tuple[str, float]], role: str) -> float:
    """Mean score of the documents of one role (NaN scores skipped; NaN when there are none)."""
    values = [v for r, v in items if r == role and not math.isnan(v)]
    return float(np.mean(values)) if values else NAN


def forget_mean(items: Sequence[tuple[str, float]]) -> float:
    return role_mean(items, "forget")


def retain_mean(items: Sequence[tuple[str, float]]) -> float:
    return role_mean(items, "retain")


def forget_retain_gap(items: Sequence[tuple[str, float]]) -> float:
    """forget mean - retain mean: near 0 for a model that never unlearned; strongly negative when the forget
    facts are gone in this format while the retain facts stay."""
    return forget_mean(items) - retain_mean(items)
