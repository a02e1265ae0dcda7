"""lm-eval's task index for our own commands: this package's task folder plus only the lm-eval task folders that
the named tasks live in, built once per process.

lm-eval's ``TaskManager()`` reads every YAML lm-eval ships (about 15,000 entries, seconds per process). Our
commands (``unlearn ci``, ``unlearn run --eval-tasks`` / ``--eval-every``, the demos) need our tasks and at most the
few lm-eval tasks a suite names (e.g. ``wmdp``). A named lm-eval task is looked for in the lm-eval folder whose name
is the longest ``_``-prefix of the task name (``wmdp_bio`` -> ``tasks/wmdp``), else in the folders of the YAMLs whose
text holds the name (``boolq`` -> ``super_glue/boolq``, read as bytes in about a second, not parsed). The index is
our folder plus those folders when it holds every name (and every member of a named group); otherwise (a glob
pattern, a group spanning other folders) lm-eval's whole index, so whatever ``lm_eval --tasks`` accepts still
works. A name no YAML holds is unknown. A plain ``lm_eval`` run does not use this module.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness_ext.lm_eval_version import LM_EVAL_05
from harness_ext.plugins import include_paths

_GLOB = re.compile(r"[*?\[]")


def lm_eval_tasks_root() -> Path:
    """The folder of the tasks lm-eval ships."""
    import lm_eval.tasks

    return Path(lm_eval.tasks.__file__).resolve().parent


@functools.cache
def _manager(folders: tuple[str, ...], defaults: bool) -> Any:
    """A ``TaskManager`` (no metadata) over our folder plus ``folders`` (plus all of lm-eval's with ``defaults``).
    Cached: each set of folders is indexed once per process."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=[*include_paths(), *folders], include_defaults=defaults)


def _folder_of(name: str, root: Path) -> str | None:
    """The lm-eval folder named by the longest ``_``-prefix of ``name`` (None if there is none)."""
    parts = name.split("_")
    for n in range(len(parts), 0, -1):
        folder = root / "_".join(parts[:n])
        if folder.is_dir():
            return str(folder)
    return None


def index_of(manager: Any) -> dict[str, Any]:
    """``manager``'s index: name -> lm-eval's entry (``.kind``, ``.cfg``, ``.tags``). lm-eval 0.4.13 calls it
    ``TaskManager.task_index``, 0.5 ``_task_index``."""
    return manager._task_index if LM_EVAL_05 else manager.task_index


def is_group(entry: Any) -> bool:
    """Whether an index entry is a group (lm-eval's private ``Kind`` enum, the same on both lines)."""
    from lm_eval.tasks._index import Kind

    return entry is not None and entry.kind == Kind.GROUP


def is_tag(entry: Any) -> bool:
    """Whether an index entry is a tag (a name standing for the tasks it tags: ``entry.tags``)."""
    from lm_eval.tasks._index import Kind

    return entry is not None and entry.kind == Kind.TAG


def _resolves(manager: Any, name: str, seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``manager`` indexes ``name`` and, for a group, every member it names."""
    entry = index_of(manager).get(name)
    if entry is None:
        return False
    if not is_group(entry) or name in seen:
        return True
    members = (entry.cfg or {}).get("task") or []
    members = [members] if isinstance(members, str) else members
    return all(_resolves(manager, m, seen | {name}) for m in members if isinstance(m, str))


@functools.cache
def _folders_mentioning(name: str, root: Path) -> list[str]:
    """The folders of the lm-eval YAMLs whose text holds ``name`` as a word (a reading, not a parsing, of them)."""
    word = re.compile(rb"(?<![\w.-])" + re.escape(name.encode()) + rb"(?![\w.-])")
    return sorted({str(p.parent) for p in root.glob("**/*.yaml") if word.search(p.read_bytes())})


def _base_manager(names: list[Any]) -> Any:
    ours = _manager((), False)
    wanted = [n for n in names if isinstance(n, str) and n not in index_of(ours) and not n.endswith(".yaml")]
    if not wanted:
        return ours
    if any(_GLOB.search(n) for n in wanted):
        return _manager((), True)
    root = lm_eval_tasks_root()
    guesses = [_folder_of(n, root) for n in wanted]
    if None not in guesses:
        partial = _manager(tuple(sorted(set(guesses))), False)  # type: ignore[arg-type]
        if all(_resolves(partial, n) for n in wanted):
            return partial
    named = [n for n in wanted if _folders_mentioning(n, root)]  # a name no YAML holds is unknown to lm-eval too
    if not named:
        return ours
    partial = _manager(tuple(sorted({f for n in named for f in _folders_mentioning(n, root)})), False)
    return partial if all(_resolves(partial, n) for n in named) else _manager((), True)


def task_manager(names: Iterable[Any] = (), metadata: dict[str, Any] | None = None) -> Any:
    """A ``TaskManager`` that knows our tasks and the lm-eval tasks in ``names`` (names; task objects are
    ignored), giving ``metadata`` to the tasks it builds. The index behind it is built once per process."""
    from harness_ext.lm_eval_patches import task_manager_with_metadata

    return task_manager_with_metadata(_base_manager(list(names)), metadata)


def indexed(names: Iterable[Any] = ()) -> dict[str, Any]:
    """The index of :func:`task_manager` for ``names``: name -> lm-eval's entry (see :func:`index_of`)."""
    return index_of(_base_manager(list(names)))


def unknown_tasks(names: list[str]) -> list[str]:
    """The names in ``names`` that are neither a task, a group nor a tag of ours or of lm-eval."""
    known = indexed(names)
    return [n for n in names if n not in known]
