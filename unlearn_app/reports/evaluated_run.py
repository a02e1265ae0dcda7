"""One evaluated run as the reports see it: metrics, provenance and (for ``unlearn ci`` folders) checks, and the
differences in provenance between runs that make them not strictly comparable."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness_ext.results import ResultsFileError, latest_results_file, partial_tasks, read_results_file, task_metrics
from unlearn_app.reports.numbers import MISSING

#: Provenance fields compared across runs, with the words a warning uses.
COMPARED = {
    "version": "package version",
    "git_commit": "git commit",
    "data_fingerprint": "data (file hashes / Hub revision)",
    "metric_modes": "metric modes",
    "reference": "reference run",
}


@dataclass
class Run:
    name: str
    path: str
    metrics: dict[str, dict[str, float]]
    provenance: dict[str, dict[str, Any]] = field(default_factory=dict)  # per task
    checks: list[dict[str, Any]] = field(default_factory=list)
    results_file: str = ""
    notes: list[str] = field(default_factory=list)  # e.g. open-unlearning values that disagree with a recomputation
    partial: list[str] = field(default_factory=list)  # tasks evaluated on part of their documents (lm_eval --limit)


def load_run(path: str | Path, name: str | None = None, reference: str | None = None) -> Run:
    """A run from an lm-eval output folder / results file, an ``unlearn ci --out`` folder (checks included) or an
    open-unlearning evaluation folder (``reference``: a retain run that its Forget Quality and PrivLeak are
    recomputed against; see :mod:`unlearn_app.open_unlearning.reader`)."""
    from unlearn_app.open_unlearning.reader import NOTES_KEY, is_ou_folder, provenance, read_ou_folder, task_notes

    path = Path(path)
    if is_ou_folder(path):
        tasks = read_ou_folder(path, reference)
        return Run(name or path.name, str(path), {t.task: t.metrics for t in tasks},
                   {t.task: provenance(t) for t in tasks}, [], ", ".join(f for t in tasks for f in t.files),
                   [f"{path}: {n}" if n.startswith(t.task + "/") else n for t in tasks for n in task_notes(t)])
    checks: list[dict[str, Any]] = []
    # an `unlearn ci --out` folder holds results.json beside lm_eval/<model>/results_*.json
    homes = [path] if path.is_dir() else list(path.parents)[:3]
    ci_file = next((h / "results.json" for h in homes if (h / "results.json").is_file()), None)
    if ci_file is not None:
        try:
            checks = json.loads(ci_file.read_text()).get("checks") or []
        except json.JSONDecodeError:
            checks = []
    file = latest_results_file(path)
    raw = read_results_file(file)
    if not raw.get("results"):
        raise ResultsFileError(f"{file} holds no results (its 'results' object is empty or missing); pass the results "
                               "of a finished lm_eval run, or leave it out.")
    configs = raw.get("configs") or {}
    prov = {t: c["provenance"] for t, c in configs.items() if isinstance(c, dict) and isinstance(c.get("provenance"), dict)}
    notes = [n for c in configs.values() if isinstance(c, dict) and isinstance(c.get(NOTES_KEY), dict)
             for n in c[NOTES_KEY].get("notes") or []]  # an open-unlearning run converted by `unlearn ci`
    partial = [f"{name or path.name}: {task} is a partial evaluation, {how}" for task, how in partial_tasks(raw).items()]
    return Run(name or path.name, str(path), task_metrics(raw), prov, checks, str(file), notes, partial)


def _comparable(prov: dict[str, Any], key: str) -> Any:
    value = prov.get(key)
    if key == "reference" and isinstance(value, dict):
        return value.get("sha256")
    return json.dumps(value, sort_keys=True)


def provenance_differences(runs: list[Run]) -> list[str]:
    """One sentence per task and provenance field in which the runs differ (missing provenance included)."""
    notes = []
    tasks = sorted({t for r in runs for t in r.metrics})
    for task in tasks:
        having = [r for r in runs if task in r.metrics]
        if len(having) < 2:
            continue
        without = [r.name for r in having if task not in r.provenance]
        if without and len(without) < len(having):
            notes.append(f"{task}: {', '.join(without)} carry no provenance (written by an older version?)")
        with_prov = [r for r in having if task in r.provenance]
        for key, words in COMPARED.items():
            if key in ("version", "git_commit"):
                continue  # software differences are reported once below
            values = {r.name: _comparable(r.provenance[task], key) for r in with_prov}
            if len(set(values.values())) > 1:
                shown = ", ".join(f"{n}={_short(r.provenance[task].get(key))}" for n, r in zip(values, with_prov))
                notes.append(f"{task}: the runs differ in {words} ({shown})")
    for key in ("version", "git_commit"):
        values = {}
        for r in runs:
            for p in r.provenance.values():
                values[r.name] = p.get(key)
                break
        if len(set(values.values())) > 1:
            notes.append(f"the runs were made with different {COMPARED[key]}s ("
                         + ", ".join(f"{n}={v}" for n, v in values.items()) + ")")
    return notes


def _short(value: Any) -> str:
    if isinstance(value, dict):
        if "sha256" in value:
            return f"{value.get('path')} ({str(value['sha256'])[:8]})"
        return ", ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, str) and len(value) == 64:
        return value[:12]
    return str(value)


def _data_read(entry: dict) -> str:
    """One data entry as read: a local file by its path (the dataset whose schema it follows in brackets), a Hub
    dataset by its id, config and revision."""
    if entry.get("kind") == "local" and entry.get("path"):
        return (f"{entry['path']} (local file, {entry.get('source')} schema) "
                f"sha256:{str(entry.get('sha256'))[:12]}")
    tail = f"sha256:{str(entry.get('sha256'))[:12]}" if entry.get("sha256") else f"rev:{entry.get('revision')}"
    return f"{entry.get('source')}/{entry.get('config', '')} {tail}"


def provenance_rows(run: Run) -> list[tuple[str, str, str]]:
    """(task, field, value) rows for the report's provenance table."""
    rows = []
    for task, p in sorted(run.provenance.items()):
        sources = "; ".join(_data_read(d) for d in p.get("data") or [])
        rows += [(task, "package", f"{p.get('package')} {p.get('version')} (git {p.get('git_commit') or MISSING})"),
                 (task, "data", sources or MISSING),
                 (task, "metric modes", _short(p.get("metric_modes") or {}) or "defaults"),
                 (task, "reference", _short(p.get("reference")) if p.get("reference") else "none")]
    return rows


def provenance_markdown(runs: list[Run]) -> str:
    """A Markdown table: one row per run and task with its package, data, metric modes and reference."""
    lines = ["## Provenance", "", "| run | task | package | data | metric modes | reference |", "|---|---|---|---|---|---|"]
    for run in runs:
        by_task: dict[str, dict[str, str]] = {}
        for task, key, value in provenance_rows(run):
            by_task.setdefault(task, {})[key] = value.replace("|", "\\|")
        for task, f in by_task.items():
            lines.append(f"| {run.name} | {task} | {f['package']} | {f['data']} | {f['metric modes']} | {f['reference']} |")
        if not by_task:
            lines.append(f"| {run.name} | | no provenance recorded | | | |")
    return "\n".join(lines) + "\n"
