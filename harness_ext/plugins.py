"""Benchmarks installed from outside this package, found through one entry-point group.

A package adds a benchmark by declaring, in its ``pyproject.toml``::

    [project.entry-points."lm_eval_unlearning.benchmarks"]
    toy = "toy_bench.benchmark"

The named module declares the benchmark (``BENCHMARK = Benchmark(...)``, see :mod:`unlearn_tasks.benchmarks`) and
the folder holding it holds the benchmark's lm-eval task YAMLs: every ``TaskManager`` of a run indexes that folder
beside this package's own (:func:`include_paths`), so ``lm_eval --tasks``, ``unlearn ci`` and ``unlearn run
--eval-tasks`` find its tasks. This module reads the group without importing the benchmarks themselves.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from harness_ext import tasks_dir

log = logging.getLogger(__name__)

#: The entry-point group of benchmarks that live outside this package.
ENTRY_POINT_GROUP = "lm_eval_unlearning.benchmarks"


def benchmark_entry_points() -> list[EntryPoint]:
    """The installed entry points of :data:`ENTRY_POINT_GROUP`, by name (one per name)."""
    found = {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return [found[name] for name in sorted(found)]


@functools.lru_cache(maxsize=1)
def plugin_task_dirs() -> tuple[Path, ...]:
    """The task folders of the installed benchmarks: the folder of each entry point's module."""
    dirs = []
    for ep in benchmark_entry_points():
        try:
            spec = importlib.util.find_spec(ep.module)
        except (ImportError, ValueError) as e:
            spec, why = None, f"{type(e).__name__}: {e}"
        else:
            why = "module not found"
        if spec is None or not spec.origin:
            log.warning("benchmark entry point %s = %s is skipped (%s)", ep.name, ep.value, why)
            continue
        dirs.append(Path(spec.origin).resolve().parent)
    return tuple(dirs)


def include_paths() -> list[str]:
    """lm-eval's ``include_path`` for a run: this package's task folder, then the installed benchmarks' folders."""
    return [str(tasks_dir()), *(str(d) for d in plugin_task_dirs())]
