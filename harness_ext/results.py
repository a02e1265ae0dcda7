"""Read lm-eval results (``results_*.json`` files or the in-memory dict) as ``{task: {metric: value}}``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def task_metrics(results: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Metric values per task, lm-eval's ``,<filter>`` suffix and stderr entries dropped."""
    out: dict[str, dict[str, float]] = {}
    for task, entries in (results.get("results") or {}).items():
        metrics = {}
        for key, value in entries.items():
            if "," not in key or "_stderr," in key:
                continue
            name = key.split(",", 1)[0]
            if isinstance(value, (int, float)):
                metrics[name] = float(value)
        out[task] = metrics
    return out


def latest_results_file(path: str | Path) -> Path:
    """The newest ``results_*.json`` under ``path`` (or ``path`` itself if it is a file)."""
    path = Path(path)
    if path.is_file():
        return path
    files = sorted(path.rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    if not files:
        raise FileNotFoundError(f"No lm-eval results_*.json under {path}; run lm_eval with --output_path {path}.")
    return files[-1]


def load_results(path: str | Path) -> dict[str, dict[str, float]]:
    """``{task: {metric: value}}`` from an lm-eval output folder or results file."""
    return task_metrics(json.loads(latest_results_file(path).read_text()))


def json_safe(value: Any) -> Any:
    """NaN/inf to None, recursively, so results files are strict JSON that any tool can read."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
