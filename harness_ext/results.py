"""Read lm-eval results (``results_*.json`` files or the in-memory dict) as ``{task: {metric: value}}``."""

from __future__ import annotations

import json
import math
import re
import sys
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
            if isinstance(value, (int, float)) and not isinstance(value, bool):  # true is no metric value
                metrics[name] = float(value)
        out[task] = metrics
    return out


def partial_tasks(results: dict[str, Any]) -> dict[str, str]:
    """The tasks of a results dict that were evaluated on part of their documents (``lm_eval --limit``), each with
    how much: lm-eval records the limit as ``config.limit`` and, per task, ``n-samples`` (``original`` documents,
    ``effective`` ones evaluated). A task whose counts show all its documents is whole whatever the limit; a task
    without counts (a group) is partial when a limit was given."""
    limit = (results.get("config") or {}).get("limit") if isinstance(results.get("config"), dict) else None
    counts = results.get("n-samples") if isinstance(results.get("n-samples"), dict) else {}
    flag = f"lm_eval --limit {limit}" if limit is not None else "fewer documents than the task has"
    out = {}
    for task in results.get("results") or {}:
        n = counts.get(task)
        original, effective = (n.get("original"), n.get("effective")) if isinstance(n, dict) else (None, None)
        if isinstance(original, int) and isinstance(effective, int):
            if effective < original:
                out[task] = f"{effective} of {original} documents ({flag})"
        elif limit is not None:
            out[task] = f"part of its documents ({flag})"
    return out


class ResultsFileError(ValueError):
    """A results file that cannot be read; the message names it."""


def results_files(path: str | Path) -> list[Path]:
    """Every ``results_*.json`` under ``path`` (or ``path`` itself if it is a file), in a fixed order: by folder,
    then by the timestamp lm-eval writes into the name (so the last of a folder is its newest run). File times
    play no part, so copying or touching files never changes which one is read."""
    path = Path(path)
    if path.is_file():
        return [path]
    files = sorted(path.rglob("results_*.json"), key=lambda p: (str(p.parent), p.name))
    if not files:
        raise FileNotFoundError(f"No lm-eval results_*.json under {path}; run lm_eval with --output_path {path}.")
    return files


def newest_per_folder(path: str | Path) -> list[Path]:
    """The newest results file of each folder under ``path`` (lm-eval writes one folder per model)."""
    newest: dict[Path, Path] = {}
    for f in results_files(path):
        newest[f.parent] = f
    return list(newest.values())


def latest_results_file(path: str | Path) -> Path:
    """The results file under ``path``: ``path`` itself, or the newest of the only folder holding results files.
    Several folders (several models' runs) are refused, naming them, since picking one would be a guess."""
    files = newest_per_folder(path)
    if len(files) > 1:
        raise ResultsFileError(
            f"{path} holds results of {len(files)} runs ({', '.join(str(f) for f in files)}); pass the folder or "
            f"results file of the one you mean."
        )
    return files[0]


def read_json_file(path: str | Path, error: type[Exception], what: str, writer: str, remedy: str | None = None) -> Any:
    """A JSON file: the one reader of the JSON files users hand us. ``error`` (one line naming the file, ``what`` it
    should be and what to do: ``remedy``, by default to re-run the ``writer`` or leave the file out) when it cannot be
    read (a folder, say), is not UTF-8 JSON, is nested too deeply to parse or holds a number Python refuses to convert
    (an integer of thousands of digits)."""
    remedy = remedy or f"re-run {writer} to rewrite it, or leave it out"
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"Cannot read the {what} {path}: {getattr(e, 'strerror', None) or e}; {remedy}.") from None
    except json.JSONDecodeError as e:
        raise error(f"{path} is not valid JSON ({e.msg} at line {e.lineno}); {remedy}.") from None
    except ValueError:  # an integer beyond Python's digit limit
        raise error(f"{path} holds a number of more than {sys.get_int_max_str_digits()} digits; {remedy}.") from None
    except RecursionError:
        raise error(f"{path} is nested too deeply to read as JSON; {remedy}.") from None


#: lm-eval 0.5 names a task inside a group ``group::task`` in its results and samples files (0.4.13: ``task``).
QUALIFIER = "::"


def plain_task_name(name: str) -> str:
    """``task`` of lm-eval 0.5's qualified ``group::task`` (a name without a qualifier unchanged)."""
    return name.rsplit(QUALIFIER, 1)[-1]


_TASK = r"[A-Za-z0-9][\w.-]*?"
#: The name of a samples file ``lm_eval --log_samples`` writes: ``samples_<task>_<date>.jsonl`` on 0.4.13; 0.5 writes
#: a task of a group under its qualified name, ``samples_<group>::<task>_<date>.jsonl`` (``<g>::<subgroup>::<task>``
#: when nested). The date is lm-eval's ``2026-12-07T06-30-00.123456``.
SAMPLES_NAME = re.compile(rf"samples_(?P<task>{_TASK}(?:{QUALIFIER}{_TASK})*)_(?P<stamp>\d[\d\-T:.]*)\.jsonl")


def samples_file_task(name: str) -> tuple[str, str] | None:
    """``(task, date)`` of a samples file's name (the task as lm-eval wrote it: ``group::task`` on 0.5 for a task of a
    group), or None for a name lm-eval does not write."""
    found = SAMPLES_NAME.fullmatch(name)
    return (found["task"], found["stamp"]) if found else None


def samples_files(results_file: Path, task: str) -> list[Path]:
    """The samples file of ``task`` (a name of :func:`read_results_file`'s results) beside an lm-eval results file:
    the one of the results file's date, else the newest; on lm-eval 0.5 the file of a task of a group, named
    ``samples_<group>::<task>_<date>.jsonl`` (:data:`SAMPLES_NAME`). Empty when there is none, or when several groups'
    files hold the task and none is named ``task`` exactly (picking one would be a guess). Symbolic links are not
    followed."""
    stamp = results_file.stem.removeprefix("results_")
    found: list[tuple[str, bool, Path]] = []  # (date, named exactly, file)
    for path in results_file.parent.glob("samples_*.jsonl"):
        named = samples_file_task(path.name)
        if named and task in (named[0], plain_task_name(named[0])) and path.is_file() and not path.is_symlink():
            found.append((named[1], named[0] == task, path))
    if not found:
        return []
    when = stamp if any(date == stamp for date, _, _ in found) else max(date for date, _, _ in found)
    of_date = [(exact, path) for date, exact, path in found if date == when]
    exact = [path for is_exact, path in of_date if is_exact]
    return exact if exact else [of_date[0][1]] if len(of_date) == 1 else []


#: The per-task sections of a results file (``group_subtasks`` also lists task names as values).
_PER_TASK = ("results", "configs", "versions", "n-shot", "higher_is_better", "n-samples", "task_hashes")


def plain_task_names(data: dict[str, Any]) -> dict[str, Any]:
    """A results dict with lm-eval 0.5's ``group::task`` names as 0.4.13 writes them (``task``), in place; a name
    that two groups qualify (the same task twice) is left qualified."""
    names = [n for n in data.get("results") or {} if isinstance(n, str)]
    plain = [plain_task_name(n) for n in names]
    rename = {n: p for n, p in zip(names, plain) if n != p and plain.count(p) == 1}
    if not rename:
        return data
    for section in _PER_TASK:
        if isinstance(data.get(section), dict):
            data[section] = {rename.get(k, k): v for k, v in data[section].items()}
    if isinstance(data.get("group_subtasks"), dict):
        data["group_subtasks"] = {k: [rename.get(t, t) for t in v] if isinstance(v, list) else v
                                  for k, v in data["group_subtasks"].items()}
    return data


def read_results_file(path: str | Path) -> dict[str, Any]:
    """One results file as a dict (lm-eval 0.5's ``group::task`` names as plain task names: see
    :func:`plain_task_names`); a file that is not an lm-eval results JSON raises :class:`ResultsFileError`."""
    data = read_json_file(path, ResultsFileError, "lm-eval results file", "lm_eval")
    if not isinstance(data, dict) or not isinstance(data.get("results", {}), dict):
        raise ResultsFileError(f"{path} is not an lm-eval results file (no 'results' mapping).")
    return plain_task_names(data)


def load_results(path: str | Path) -> dict[str, dict[str, float]]:
    """``{task: {metric: value}}`` from an lm-eval output folder (of one run) or results file."""
    return task_metrics(read_results_file(latest_results_file(path)))


def json_safe(value: Any) -> Any:
    """NaN/inf to None, recursively, so results files are strict JSON that any tool can read."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
