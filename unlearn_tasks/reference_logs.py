"""Reference runs inside our own lm-eval results files.

A metric that compares a model with a retrained (retain) model, such as Forget Quality or PrivLeak, needs numbers
from the reference model's evaluation. Each benchmark task writes what it would need as a reference into lm-eval's
results file, under ``configs.<task>.unlearning_reference``, tagged with a ``format`` naming the benchmark
(``lm-eval-unlearning/<benchmark>-reference/1``). :func:`find_records` reads them back from a results file or an
output folder, newest file first; each benchmark then picks its own records.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

RESULTS_KEY = "unlearning_reference"


class ReferenceLogError(ValueError):
    """A reference log that cannot serve this evaluation; the message says why and what to pass instead."""


def record_format(benchmark: str) -> str:
    """The ``format`` tag of a benchmark's reference record."""
    return f"lm-eval-unlearning/{benchmark}-reference/1"


def is_benchmark(record: dict, benchmark: str) -> bool:
    """Whether ``record`` is a reference record written by ``benchmark``'s task."""
    return str(record.get("format", "")).startswith(f"lm-eval-unlearning/{benchmark}-reference/")


def find_records(path: str | Path, accept: Callable[[dict], bool] | None = None) -> list[tuple[dict, str]]:
    """``(record, results file)`` for every reference record under ``path`` (a ``results_*.json`` file or an
    lm-eval output folder, searched recursively, newest file first) that ``accept`` keeps."""
    path = Path(path)
    files = [path] if path.is_file() else sorted(path.rglob("results_*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    records = []
    for f in files:
        try:
            data = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        for cfg in (data.get("configs") or {}).values() if isinstance(data, dict) else ():
            if isinstance(cfg, dict) and isinstance(cfg.get(RESULTS_KEY), dict):
                if accept is None or accept(cfg[RESULTS_KEY]):
                    records.append((cfg[RESULTS_KEY], str(f)))
    return records
