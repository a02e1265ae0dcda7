"""lm-eval's metric helpers our tasks and the leaderboard aggregate with, by one name on both lm-eval lines.

``lm_eval.api.metrics`` is a module on 0.4.13 and a package on 0.5 (``aggregations``, ``stderr``, ...); the names
used here are re-exported by both, and the registries' lookups (``get_aggregation``, ``get_reduction``) are
lm-eval's documented registry API. On 0.5 :func:`pass_at_k` is lm-eval's registered ``pass@k`` reduction
(Chen et al. 2021's unbiased estimator), which Leak@k uses there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from lm_eval.api.metrics import mean  # lm-eval's own object: lm-eval gives it (by identity) a standard error

from harness_ext.lm_eval_version import LM_EVAL_05

_COMPOSITE = re.compile(r"[^()]+\((.+)\)")


def aggregation(name: str) -> Callable[[list], float] | None:
    """The aggregation lm-eval registers under ``name`` (``mean``, ``median``, ...), or None."""
    from lm_eval.api.registry import get_aggregation

    return get_aggregation(name)


def pooled_mean(values: list[float], sizes: list[int], weight_by_size: bool = True) -> float:
    """A group's value from its members' (lm-eval's ``aggregate_subtask_metrics``)."""
    from lm_eval.api.metrics import aggregate_subtask_metrics

    return aggregate_subtask_metrics(values, sizes, weight_by_size)


def pass_at_k(flags: Sequence[Any], ks: list[int]) -> dict[int, float] | None:
    """lm-eval 0.5's ``pass@k`` reduction of one document's per-sample flags, ``{k: value}``; None on 0.4.13
    (which has no such reduction)."""
    if not LM_EVAL_05:
        return None
    from lm_eval.api.registry import get_reduction

    reduced = get_reduction("pass@k")(None, list(flags), k=list(ks))
    return {k: float(reduced[f"pass@{k}"]) for k in ks}


def parent_metric(key: str) -> str | None:
    """The metric a reduced key of lm-eval 0.5 comes from (``pass@1(exact_match)`` -> ``exact_match``: a metric
    with ``repeats`` > 1 reduced by ``pass@k``), aggregated as its parent is; None for a plain metric name."""
    match = _COMPOSITE.fullmatch(key)
    return match.group(1) if match else None


__all__ = ["aggregation", "mean", "parent_metric", "pass_at_k", "pooled_mean"]
