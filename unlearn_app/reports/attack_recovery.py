"""Recovery report for attacks on an unlearned model: per attacked model and metric, the value before the attack
(the unlearned model), after it, the target (before unlearning) and retain (never saw the forget set) references,
and the recovery ratio ``(after - unlearned) / (target - unlearned)``: 0 = the attack brought nothing back,
1 = back to the target model's value."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

from unlearn_app.reports.numbers import format_number


@dataclass
class RecoveryRow:
    attack: str
    metric: str  # "task/metric"
    unlearned: float | None
    after: float | None
    target: float | None
    retain: float | None
    recovery: float | None


def recovery_ratio(unlearned: float | None, after: float | None, target: float | None) -> float | None:
    """``(after - unlearned) / (target - unlearned)``; None when a value is missing or target equals unlearned."""
    if unlearned is None or after is None or target is None or math.isclose(target, unlearned, abs_tol=1e-12):
        return None
    return (after - unlearned) / (target - unlearned)


def flat_metrics(path: str | Path) -> dict[str, float]:
    """``{"task/metric": value}`` from an lm-eval output folder or results file."""
    from harness_ext.results import load_results

    return {f"{task}/{name}": v for task, ms in load_results(path).items() for name, v in ms.items()}


def _pick(values: dict[str, float], metric: str, source: str) -> float:
    if metric not in values:
        near = ", ".join(sorted(values)[:12])
        raise ValueError(f"{source} has no metric {metric!r}; it has: {near}")
    return values[metric]


def recovery_rows(unlearned: dict[str, float], attacked: dict[str, dict[str, float]], metrics: list[str],
                  target: dict[str, float] | None = None, retain: dict[str, float] | None = None) -> list[RecoveryRow]:
    """One row per (attacked model, metric); ``attacked`` maps an attack name to its flat metrics."""
    rows = []
    for name, after in attacked.items():
        for m in metrics:
            u, a = _pick(unlearned, m, "the unlearned model's results"), _pick(after, m, f"{name}'s results")
            t = _pick(target, m, "the target model's results") if target is not None else None
            r = _pick(retain, m, "the retain model's results") if retain is not None else None
            rows.append(RecoveryRow(name, m, u, a, t, r, recovery_ratio(u, a, t)))
    return rows


def to_markdown(rows: list[RecoveryRow]) -> str:
    lines = ["| attack | metric | unlearned | after attack | target | retain | recovery |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r.attack} | {r.metric} | {format_number(r.unlearned)} | {format_number(r.after)} | {format_number(r.target)} | "
              f"{format_number(r.retain)} | {format_number(r.recovery)} |" for r in rows]
    return "\n".join(lines) + "\n\nrecovery = (after - unlearned) / (target - unlearned): 0 = nothing came back, " \
        "1 = back to the target model.\n"


def to_json(rows: list[RecoveryRow]) -> dict:
    return {"formula": "(after - unlearned) / (target - unlearned)", "rows": [asdict(r) for r in rows]}
