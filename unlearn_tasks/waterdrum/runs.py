"""Turn the per-item record a WaterDrum task writes into lm-eval's results file into meta-evaluation runs.

The record (``configs.<task>.unlearning_waterdrum``, see :mod:`unlearn_tasks.waterdrum.aggregate`) holds the
forget/retain strengths, every generation's own-id score and the baselines' per-item values, so the report can
compute D1/D2 for WaterDrum and for ROUGE-L, KnowMem and Min-K% from the same runs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from unlearn_tasks.waterdrum.aggregate import FORMAT
from unlearn_tasks.waterdrum.meta_eval import ModelRun

RESULTS_KEY = "unlearning_waterdrum"
#: Baselines in the report; Min-K% is negated so that, as for every other metric, higher = more memorised.
BASELINE_SIGN = {"rougeL_recall": 1.0, "knowmem": 1.0, "min_k": -1.0}


def records_in_results(results: Mapping[str, Any]) -> dict[str, dict]:
    """``{task: record}`` for every WaterDrum task in a parsed lm-eval results file."""
    out = {}
    for task, config in (results.get("configs") or {}).items():
        record = config.get(RESULTS_KEY) if isinstance(config, Mapping) else None
        if isinstance(record, Mapping) and record.get("format") == FORMAT:
            out[task] = dict(record)
    return out


def _finite(values: list) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def model_run(name: str, record: Mapping[str, Any], role: str | None = None, fraction_trained: float | None = None,
              metric: str = "waterdrum") -> ModelRun:
    """A :class:`ModelRun` of ``metric`` (``waterdrum`` or a baseline key) from a task's record."""
    if metric == "waterdrum":
        q_split = record["queries"]["split"]
        gens = record["generations"]
        split_of = [q_split[q] for q in gens["query"]]
        forget = _finite([s for s, sp in zip(gens["score"], split_of) if sp == "forget"])
        retain = _finite([s for s, sp in zip(gens["score"], split_of) if sp == "retain"])
        f_val, r_val = record.get("forget_strength"), record.get("retain_strength")
    else:
        base = record["baselines"][metric]
        sign = BASELINE_SIGN.get(metric, 1.0)
        forget = [sign * v for v in _finite([v for v, sp in zip(base["value"], base["split"]) if sp == "forget"])]
        retain = [sign * v for v in _finite([v for v, sp in zip(base["value"], base["split"]) if sp == "retain"])]
        f_val, r_val = _mean(forget), _mean(retain)
    if f_val is None or r_val is None or not (math.isfinite(f_val) and math.isfinite(r_val)):
        raise ValueError(f"run {name!r}: no finite forget/retain {metric} values")
    return ModelRun(name, float(f_val), float(r_val), role, fraction_trained, forget or None, retain or None)
