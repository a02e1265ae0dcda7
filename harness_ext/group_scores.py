"""Scores a group computes from several tasks' results (lm-eval groups only average one metric over their tasks).

A benchmark registers ``scores(per_task) -> {metric: value}`` for its group name with :func:`register`; once lm-eval
has aggregated its groups, :func:`add_group_scores` computes them from every task's and group's metrics of the run
(``{task: {metric: value}}``, filters dropped: another group's result, e.g. ``mmlu``'s ``acc``, included) and writes
them into the group's row of the results as ``<metric>,none``. :func:`patch_aggregate_groups` wraps lm-eval 0.4.13's
``lm_eval.evaluator_utils.aggregate_groups`` (the one step after which every task's and group's metrics are known),
so the scores appear in ``lm_eval``'s table and results file of that one invocation; and
``lm_eval.evaluator_utils._propagate_higher_is_better`` (which rebuilds each group's directions from its tasks'), so
the results' ``higher_is_better`` of the group holds its scores too (higher is better) and the table shows their
arrows.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

from harness_ext.lm_eval_version import LM_EVAL_05

#: group name -> its scores function
GROUP_SCORES: dict[str, Callable[[Mapping[str, Mapping[str, float]]], dict[str, float]]] = {}
FILTER = "none"
#: group name -> the names of the scores last written into its row (their directions are added after lm-eval's)
WRITTEN: dict[str, list[str]] = {}


def register(group: str, scores: Callable[[Mapping[str, Mapping[str, float]]], dict[str, float]]) -> None:
    """Compute ``scores`` for ``group`` after lm-eval's group aggregation (and install the patch that does it)."""
    GROUP_SCORES[group] = scores
    patch_aggregate_groups()


def plain_metrics(metrics: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """``{task: {metric: value}}`` of lm-eval's ``{task: {"metric,filter": value}}`` (stderr and non-numbers dropped;
    the first filter of a metric wins; lm-eval 0.5's ``group::task`` names plain)."""
    from harness_ext.results import plain_task_name

    out: dict[str, dict[str, float]] = {}
    for task, entries in metrics.items():
        task = plain_task_name(task)  # lm-eval 0.5's group::task
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
        scores = GROUP_SCORES[group](per_task)
        WRITTEN[group] = list(scores)
        for name, value in scores.items():
            metrics[group][f"{name},{FILTER}"] = None if math.isnan(value) else value
            metrics[group][f"{name}_stderr,{FILTER}"] = "N/A"
            if higher_is_better is not None:
                higher_is_better.setdefault(group, {})[name] = True


#: lm-eval's two steps, by name: 0.4.13's, else 0.5's (the same roles, renamed private).
_STEPS = ("_aggregate_groups", "_propagate_higher_is_better_") if LM_EVAL_05 else (
    "aggregate_groups", "_propagate_higher_is_better")


def patch_aggregate_groups() -> None:
    """Make ``lm_eval.evaluator_utils.aggregate_groups`` (0.5: ``_aggregate_groups``) add the registered groups'
    scores (idempotent)."""
    from lm_eval import evaluator_utils

    aggregate_name, propagate_name = _STEPS
    original = getattr(evaluator_utils, aggregate_name)
    if getattr(original, "_unlearn_patched", False):
        return

    @functools.wraps(original)
    def aggregate_groups(results: Any) -> Any:
        results = original(results)
        add_group_scores(results.metrics, getattr(results, "higher_is_better", None))
        return results

    aggregate_groups._unlearn_patched = True  # type: ignore[attr-defined]
    setattr(evaluator_utils, aggregate_name, aggregate_groups)

    propagate = getattr(evaluator_utils, propagate_name)

    @functools.wraps(propagate)
    def propagate_higher_is_better(all_groups: list[Any], higher_is_better: dict[str, dict[str, bool]]) -> None:
        propagate(all_groups, higher_is_better)
        for group in all_groups:
            if group.name in WRITTEN:
                higher_is_better.setdefault(group.name, {}).update(dict.fromkeys(WRITTEN[group.name], True))

    setattr(evaluator_utils, propagate_name, propagate_higher_is_better)
