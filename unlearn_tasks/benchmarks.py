"""The benchmarks, found without a list: each declares itself once, beside its code.

A benchmark of this package is a folder ``unlearn_tasks/<name>/`` whose module ``benchmark.py`` holds
``BENCHMARK = Benchmark(...)``: its task names, the rows of its ``unlearn report`` table and the direction of
its metrics; its options classes (:class:`~unlearn_tasks.metadata.MetadataOptions` subclasses, which register
themselves) live in ``options.py`` beside it. A benchmark installed from another package declares the same object
in the module that its entry point of the ``lm_eval_unlearning.benchmarks`` group names (:mod:`harness_ext.plugins`),
and defines or imports its options classes there; its task YAMLs sit beside that module. :func:`benchmarks` and
:func:`import_options` find both kinds; nothing else lists them. Declarations stay light (no ``datasets``, no
``torch``): ``unlearn report`` reads them.
"""

from __future__ import annotations

import functools
import importlib
import logging
import pkgutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from harness_ext.plugins import benchmark_entry_points

log = logging.getLogger(__name__)

#: The module of a benchmark package that declares it, the name it declares it under, and its options module.
DECLARATION_MODULE = "benchmark"
DECLARATION = "BENCHMARK"
OPTIONS_MODULE = "options"


@dataclass(frozen=True)
class Benchmark:
    """What the rest of the package needs to know about one benchmark.

    ``tasks``: the names (or name prefixes) of its lm-eval tasks and groups; ``rows``: ``(metric, label)`` of its
    ``unlearn report`` table, in order (metrics not listed follow alphabetically; without rows its tasks get the
    TOFU order); ``lower_is_better``: the metrics for which a lower value means better unlearning (its task classes
    report these to lm-eval as ``higher_is_better: false``; every other metric is higher-is-better); ``beside``:
    another task's metric shown first in a task's table when the same run holds both, as ``(task, other task,
    its metric, label)`` (Leak@k beside the greedy forget ROUGE of the same questions; the first other task found
    wins)."""

    name: str
    tasks: tuple[str, ...]
    rows: tuple[tuple[str, str], ...] = ()
    lower_is_better: frozenset[str] = frozenset()
    beside: tuple[tuple[str, str, str, str], ...] = ()

    def match(self, task: str) -> int:
        """Length of the longest of :attr:`tasks` that ``task`` starts with (0: not this benchmark's task)."""
        return max((len(p) for p in self.tasks if task.startswith(p)), default=0)


def _declared(module: ModuleType, where: str) -> Benchmark:
    value = getattr(module, DECLARATION, None)
    if not isinstance(value, Benchmark):
        raise TypeError(f"{where} declares no {DECLARATION} = Benchmark(...)")
    return value


def _builtin_modules(module: str) -> list[str]:
    """``unlearn_tasks.<name>.<module>`` for every sub-package of this package that has such a module."""
    import unlearn_tasks

    found = []
    for info in pkgutil.iter_modules(unlearn_tasks.__path__):
        folder = getattr(info.module_finder, "path", None)
        if info.ispkg and folder and (Path(folder) / info.name / f"{module}.py").is_file():
            found.append(f"unlearn_tasks.{info.name}.{module}")
    return sorted(found)


@functools.lru_cache(maxsize=1)
def benchmarks() -> dict[str, Benchmark]:
    """Every benchmark by name: this package's (``unlearn_tasks/*/benchmark.py``), then the installed ones (entry
    points of ``lm_eval_unlearning.benchmarks``; one that fails to import, declares nothing or reuses a name is
    skipped with a warning)."""
    found: dict[str, Benchmark] = {}

    def add(bench: Benchmark, where: str) -> None:
        if bench.name in found:
            raise ValueError(f"two benchmarks are named {bench.name!r} (the second in {where})")
        found[bench.name] = bench

    for name in _builtin_modules(DECLARATION_MODULE):
        add(_declared(importlib.import_module(name), name), name)
    for ep in benchmark_entry_points():
        where = f"entry point {ep.name} = {ep.value}"
        try:  # a broken or clashing plugin must not stop the other benchmarks
            add(_declared(ep.load(), where), where)
        except Exception as e:
            log.warning("benchmark %s is skipped: %s: %s", where, type(e).__name__, e)
    return found


def benchmark(name: str) -> Benchmark:
    """The benchmark called ``name``; ``KeyError`` lists the known ones."""
    known = benchmarks()
    if name not in known:
        raise KeyError(f"no benchmark {name!r}; known: {', '.join(known)}")
    return known[name]


def benchmark_of_task(task: str) -> Benchmark | None:
    """The benchmark whose task names ``task`` starts with (the longest match), or None."""
    best = max(benchmarks().values(), key=lambda b: b.match(task), default=None)
    return best if best is not None and best.match(task) else None


@functools.lru_cache(maxsize=1)
def import_options() -> None:
    """Import every benchmark's options classes, so that they have registered themselves: ``options.py`` of this
    package's benchmarks and the modules of the installed ones (imported by :func:`benchmarks`)."""
    for name in _builtin_modules(OPTIONS_MODULE):
        importlib.import_module(name)
    benchmarks()
