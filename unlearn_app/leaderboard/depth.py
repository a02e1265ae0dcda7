"""``unlearn depth``'s results on the leaderboard: the file a submission carries and the UDS recomputed from it.

A submission carries, per UDS task, ``depth/<task>.json``: the results file's ``per_item`` (per question: the
evaluated span, the target's unpatched score ``full``, the stage-1 and stage-2 scores ``s1`` and ``s2`` per layer,
the KE layers and the UDS shown) and ``skipped`` (the questions not scored, with the reason). Validation recomputes
every question's UDS and the aggregates (``uds``, ``scored``, ``without_ke_layer``, ``skipped``) from the per-layer
scores with the command's own functions (:func:`unlearn_tasks.metrics.depth.example_depth`, ``overall_uds``) at the
threshold the run's options record (``tau`` in the task's provenance ``metric_modes``). The file is untrusted: every
score must be a finite number, every question must have as many layers as the others; anything else is one line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: What ``unlearn depth`` writes as its results file's ``config.model``: how its results are told from others.
PRODUCER = "unlearn depth"
#: The aggregates recomputed (what ``results.<task>`` of ``results_uds.json`` holds).
AGGREGATES = ("uds", "scored", "without_ke_layer", "skipped")
#: The per-item keys the recomputation reads.
SCORES = ("full", "s1", "s2")


class DepthError(ValueError):
    """A depth file or threshold that cannot be recomputed from; the message is one line."""


@dataclass
class DepthAgain:
    """The aggregates recomputed from a depth file, and the questions whose shown UDS differs (index -> line)."""

    values: dict[str, float] = field(default_factory=dict)
    item_mismatches: list[str] = field(default_factory=list)


def is_depth(raw: Mapping[str, Any], task: str) -> bool:
    """Whether ``task`` of the parsed results file ``raw`` is ``unlearn depth``'s (per-item scores in its config)."""
    config = (raw.get("configs") or {}).get(task)
    return (raw.get("config") or {}).get("model") == PRODUCER and isinstance(config, dict) and \
        isinstance(config.get("per_item"), list)


def carried(raw: Mapping[str, Any], task: str) -> bytes:
    """The bytes of ``depth/<task>.json``: the task's ``per_item`` and ``skipped``, as strict JSON (NaN as null)."""
    from harness_ext.results import json_safe

    config = raw["configs"][task]
    content = {"per_item": config["per_item"], "skipped": config.get("skipped") or []}
    return (json.dumps(json_safe(content), indent=2, sort_keys=True) + "\n").encode()


def threshold_of(modes: Any) -> float:
    """The run's KE-layer threshold (``tau`` of its options); DepthError when missing or not a finite number >= 0
    (what ``unlearn depth --tau`` accepts)."""
    value = modes.get("tau") if isinstance(modes, Mapping) else None
    if value is None:
        raise DepthError("its options record no tau (the KE-layer threshold the UDS was computed at)")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise DepthError(f"its options' tau {str(value)[:40]!r} is not a finite number >= 0")
    return float(value)


def _finite(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DepthError(f"{where} is {str(value)[:40]!r}, not a finite number")
    return float(value)


def _scores(item: Any, n: int, layers: int | None) -> tuple[float, list[float], list[float]]:
    """``full``, ``s1``, ``s2`` of question ``n``, checked."""
    if not isinstance(item, dict):
        raise DepthError(f"per_item[{n}] is not an object with {', '.join(SCORES)}")
    full = _finite(item.get("full"), f"per_item[{n}].full")
    stages = []
    for key in ("s1", "s2"):
        values = item.get(key)
        if not isinstance(values, list) or not values:
            raise DepthError(f"per_item[{n}].{key} is not a list of per-layer scores")
        stages.append([_finite(v, f"per_item[{n}].{key}[{i}]") for i, v in enumerate(values)])
    if len(stages[0]) != len(stages[1]):
        raise DepthError(f"per_item[{n}] has {len(stages[0])} stage-1 and {len(stages[1])} stage-2 layers")
    if layers is not None and len(stages[0]) != layers:
        raise DepthError(f"per_item[{n}] has {len(stages[0])} layers, per_item[0] {layers}")
    return full, stages[0], stages[1]


def recompute(content: Mapping[str, Any], tau: float) -> DepthAgain:
    """The aggregates of a parsed depth file at threshold ``tau``, and the questions whose shown UDS disagrees."""
    from unlearn_tasks.metrics.depth import example_depth, overall_uds

    items, skipped = content.get("per_item"), content.get("skipped", [])
    if not isinstance(items, list) or not isinstance(skipped, list):
        raise DepthError("it is not a depth file (per_item and skipped, lists)")
    examples, again = [], DepthAgain()
    for n, item in enumerate(items):
        full, s1, s2 = _scores(item, n, len(examples[0].d1) if examples else None)
        example = example_depth(full, s1, s2, tau)
        examples.append(example)
        shown = item.get("uds")
        if shown is not None:
            shown = _finite(shown, f"per_item[{n}].uds")
        if (shown is None) != (example.uds is None) or (shown is not None and not _close(shown, example.uds)):
            again.item_mismatches.append(f"question {n}: UDS {_text(shown)} shown, {_text(example.uds)} recomputed "
                                         "from its per-layer scores")
    uds = overall_uds(examples)
    scored = sum(e.uds is not None for e in examples)
    again.values = {"scored": float(scored), "without_ke_layer": float(len(examples) - scored),
                    "skipped": float(len(skipped))}
    if uds is not None:
        again.values["uds"] = uds
    return again


def _close(a: float, b: float) -> bool:
    from unlearn_app.open_unlearning.reader import TOLERANCE

    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=1e-12)


def _text(value: float | None) -> str:
    return "undefined (no KE layer)" if value is None else f"{value:.6g}"
