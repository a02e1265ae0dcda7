"""Scores a group computes from several tasks' results (lm-eval groups only average one metric over their tasks).

A benchmark registers ``scores(per_task) -> {metric: value}`` for its group name with :func:`register`; once lm-eval
has aggregated its groups, :func:`add_group_scores` computes them from every task's and group's metrics of the run
(``{task: {metric: value}}``, filters dropped: another group's result, e.g. ``mmlu``'s ``acc``, included) and writes
them into the group's row of the results as ``<metric>,none``. :func:`patch_aggregate_groups` wraps lm-eval 0.4.13's
``lm_eval.evaluator_utils.aggregate_groups`` (the one step after which every task's and group's metrics are known),
so the scores appear in ``lm_eval``'s table and results file of that one invocation.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

#: group name -> its scores function
GROUP_SCORES: dict[str, Callable[[Mapping[str, Mapping[str, float]]], dict[str, float]]] = {}
FILTER = "none"


def register(group: str, scores: Callable[[Mapping[str, Mapping[str, float]]], dict[str, float]]) -> None:
    """Compute ``scores`` for ``group`` after lm-eval's group aggregation (and install the patch that does it)."""
    GROUP_SCORES[group] = scores
    patch_aggregate_groups()


def plain_metrics(metrics: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """``{task: {metric: value}}`` of lm-eval's ``{task: {"metric,filter": value}}`` (stderr and non-numbers dropped;
    the first filter of a metric wins)."""
    out: dict[str, dict[str, float]] = {}
    for task, entries in metrics.items():
        row: dict[str, float] = {}
        for key, value in (entries or {}).items():
            if "," not in key or "_stderr," in key or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            row.setdefault(key.split(",", 1)[0], float(value))
        out[task] = row
    return out


def add_group_scores(metrics: dict[str, dict[str, Any]], higher_is_better: dict[str, dict[str, bool]] | None = None
                     ) -> None:
    """Write each registered group's scores (of a group present in ``metrics``) into its row, in place."""
    present = [g for g in GROUP_SCORES if g in metrics]
    if not present:
        return
    per_task = plain_metrics(metrics)
    for group in present:
        for name, value in GROUP_SCORES[group](per_task).items():
            metrics[group][f"{name},{FILTER}"] = None if math.isnan(value) else value
            metrics[group][f"{name}_stderr,{FILTER}"] = "N/A"
            if higher_is_better is not None:
                higher_is_better.setdefault(group, {})[name] = True


def patch_aggregate_groups() -> None:
    """Make ``lm_eval.evaluator_utils.aggregate_groups`` add the registered groups' scores (idempotent)."""
    from lm_eval import evaluator_utils

    original = evaluator_utils.aggregate_groups
    if getattr(original, "_unlearn_patched", False):
        return

    @functools.wraps(original)
    def aggregate_groups(results: Any) -> Any:
        results = original(results)
        add_group_scores(results.metrics, getattr(results, "higher_is_better", None))
        return results

    aggregate_groups._unlearn_patched = True  # type: ignore[attr-defined]
    evaluator_utils.aggregate_groups = aggregate_groups
