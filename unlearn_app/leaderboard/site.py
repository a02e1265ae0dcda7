"""The leaderboard's static site: ``index.html`` (one sortable table per task, filters by model family and method,
the forget-vs-utility picture with its Pareto front), ``submissions/<id>.html`` (provenance, what was recomputed,
downloads) and ``data/<id>/`` (the submission's files). No server, nothing fetched from elsewhere: it can be served
by GitHub Pages or a static Hub Space as it is.

The pages are the templates ``leaderboard_index.html`` and ``leaderboard_submission.html`` (:mod:`unlearn_app.pages`);
the functions here prepare their data: rows, cells with their marks, status classes, facts, as plain text."""

from __future__ import annotations

import hashlib
import math
import re
import shutil
from pathlib import Path
from typing import Any

from unlearn_app import pages
from unlearn_app.leaderboard.importers import Row
from unlearn_app.leaderboard.publish import publish
from unlearn_app.leaderboard.validate import Check

#: Per benchmark: (utility metric, its better direction, forget metric, its better direction) of the picture.
AXES = {"tofu": ("model_utility", "max", "forget_quality", "max"),
        "muse": ("retain_knowmem", "max", "forget_verbmem", "min")}
#: Metrics shown first in a table, when present.
FIRST = ("forget_quality", "model_utility", "forget_verbmem", "forget_knowmem", "retain_knowmem", "privleak")


def _fmt(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "n/a"
    return f"{v:.2e}" if v != 0 and abs(v) < 1e-3 else f"{v:.4f}"


def status_text(check: Check) -> str:
    """The submission page's status line."""
    if check.validated:
        return "validated: every number recomputed from its per-item values"
    if check.ok:
        return f"{check.status}: the numbers marked unverifiable were not recomputed"
    return "FAILED validation"


def reference_text(ref: dict[str, Any] | None) -> str:
    """The reference run as the submission page names it: folder name, model and revision, digest."""
    if not ref:
        return "none"
    model = f", model {ref['model']}" + (f" @ {ref['revision']}" if ref.get("revision") else "") if ref.get("model") else ""
    return f"{ref.get('source')}{model} (sha256 {str(ref.get('sha256', ''))[:12]})"


def rows_of(check: Check) -> list[Row]:
    """The site's rows of one submission (none when it was refused): one per task."""
    r = check.record or {}
    model = r.get("model") or {}
    out = []
    for task, entry in sorted((r.get("results") or {}).items()):
        out.append(Row(task, model.get("name", check.id), model.get("family", "?"), (r.get("method") or {}).get("name", "?"),
                       dict(entry.get("aggregates") or {}), check.status,
                       f"submission {check.id}", (r.get("submitter") or {}).get("name", ""),
                       f"submissions/{check.id}.html",
                       sorted(set(check.recomputed.get(task, {})) - set(check.mismatched.get(task, []))),
                       sorted(check.mismatched.get(task, [])), sorted(check.unverified.get(task, []))))
    return out


def status_class(status: str) -> str:
    """The CSS class of a status text: its first word (``validated``, ``failed``, ``recomputed``, ``unverifiable``,
    ``partly`` of ``partly verified (N of M)``), or none for anything else."""
    word = status.split(" ", 1)[0]
    return word if re.fullmatch(r"[a-z]+", word) else ""


def metric_mark(row: Row, metric: str) -> tuple[str, str]:
    """A metric cell's CSS class and tooltip: what the check of ``row`` found for ``metric`` ("" when nothing)."""
    if metric in row.mismatched:
        return "failed", "the per-item values give another number"
    if metric in row.recomputed:
        return "recomputed", "recomputed from the per-item values"
    if metric in row.unverified:
        return "unverifiable", "not recomputed: no per-item values for it"
    return "", ""


def metric_columns(rows: list[Row]) -> list[str]:
    """The metric columns of a table: :data:`FIRST` in its order, then the others alphabetically."""
    return sorted({m for r in rows for m in r.metrics}, key=lambda m: (m not in FIRST, FIRST.index(m) if m in FIRST else 0, m))


def board_table(task: str, rows: list[Row], prefix: str = "") -> dict[str, Any]:
    """One task's sortable table as the index template draws it: its metric columns and, per row, the texts,
    the link to the submission's page, the status and each metric cell (text, sort value, mark)."""
    metrics = metric_columns(rows)
    out = []
    for r in rows:
        cells = []
        for m in metrics:
            v = r.metrics.get(m)
            mark, title = metric_mark(r, m)
            cells.append({"text": _fmt(v), "value": "" if v is None else str(v), "mark": mark, "title": title})
        out.append({"model": r.model, "href": prefix + r.page if r.page else None, "family": r.family,
                    "method": r.method, "status": r.status, "status_class": status_class(r.status),
                    "source": r.source, "cells": cells})
    return {"task": task, "metrics": metrics, "rows": out}


def drawn(row: Row, *metrics: str) -> bool:
    """Whether ``row`` is drawn in a picture of ``metrics``: a submission's (a row with a page) only when both were
    recomputed; a failed row never; an imported row as its status says."""
    if row.status in ("failed", "refused"):
        return False
    return row.page is None or all(m in row.recomputed for m in metrics)


def picture_name(task: str) -> str:
    """``pareto_<task>.png``, with a task name that is not a plain name made safe (and told apart by a hash)."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "-", task).strip("-") or "task"
    return f"pareto_{safe}.png" if safe == task else f"pareto_{safe}-{hashlib.sha256(task.encode()).hexdigest()[:8]}.png"


def pareto_picture(task: str, rows: list[Row], path: Path) -> Path | None:
    """Forget vs utility of ``rows`` with the Pareto front (PNG); None when fewer than one row has both numbers."""
    from unlearn_app.reports.plots import pareto_scatter
    from unlearn_app.sweep.leaderboard import pareto_front

    axes = AXES.get(task.split("_")[0])
    if axes is None:
        return None
    ux, umode, fy, fmode = axes
    points = {f"{r.model} / {r.method} ({r.status})": (r.metrics[ux], r.metrics[fy], r.method) for r in rows
              if ux in r.metrics and fy in r.metrics and drawn(r, ux, fy)}
    if not points:
        return None
    front = pareto_front({k: (x, y) for k, (x, y, _) in points.items()}, (umode, fmode))
    return pareto_scatter(points, front, path, ux, fy, (umode, fmode), f"{task}: forget vs utility")


def submission_facts(check: Check) -> list[tuple[str, str]]:
    """The provenance table of a submission's page: (field, text) pairs."""
    r = check.record or {}
    model, method = r.get("model") or {}, r.get("method") or {}
    facts = [("status", status_text(check)),
             ("model", model.get("name")), ("family", model.get("family")),
             ("Hub id", f"{model.get('hub_id')} @ {model.get('revision')}" if model.get("hub_id") else "n/a"),
             ("local folder sha256", model.get("local_sha256") or "n/a"),
             ("method", method.get("name")),
             ("hyperparameters", ", ".join(f"{k}={v}" for k, v in (method.get("hyperparameters") or {}).items()) or "none"),
             ("reference", reference_text(r.get("reference"))),
             ("date", r.get("date")), ("submitted by", (r.get("submitter") or {}).get("name") or "n/a"),
             ("notes", (r.get("submitter") or {}).get("notes") or ""),
             ("packages", ", ".join(f"{k} {v}" for k, v in (r.get("packages") or {}).items() if v))]
    return [(k, str(v)) for k, v in facts]


def submission_results(check: Check) -> list[dict[str, Any]]:
    """Per task of a submission: its run, kind, version and, per metric, the submitted number, the recomputed one
    and the mark (``recomputed``, ``failed`` or ``unverifiable``)."""
    out = []
    for task, entry in sorted(((check.record or {}).get("results") or {}).items()):
        metrics = []
        for metric, value in sorted((entry.get("aggregates") or {}).items()):
            again = check.recomputed.get(task, {}).get(metric)
            mark = "recomputed" if again is not None else "unverifiable"
            if metric in check.mismatched.get(task, []):
                mark = "failed"
            metrics.append({"metric": metric, "submitted": _fmt(value), "recomputed": _fmt(again), "mark": mark})
        out.append({"task": task, "run": str(entry.get("run")), "kind": str(entry.get("kind")),
                    "version": str(entry.get("version")), "metrics": metrics})
    return out


def _submission_page(check: Check, files: list[str]) -> str:
    return pages.render("leaderboard_submission.html", title=check.id, id=check.id, facts=submission_facts(check),
                        errors=check.errors, notes=check.notes, results=submission_results(check), files=files)


def build_site(checks: list[Check], imported: list[Row], out: str | Path, title: str = "Unlearning leaderboard") -> Path:
    """Write the site into ``out``; returns ``out/index.html``."""
    from unlearn_app.output_guard import write_text

    out = Path(out)
    (out / "submissions").mkdir(parents=True, exist_ok=True)
    checks = [c for c in checks if not c.refused]  # a refused submission is not shown, nothing of it published
    rows = [row for c in checks for row in rows_of(c)] + list(imported)
    for c in checks:
        data = out / "data" / c.id
        shutil.rmtree(data, ignore_errors=True)
        files = publish(c, data)
        write_text(out / "submissions" / f"{c.id}.html", _submission_page(c, files))
    tasks = []
    for task in sorted({r.task for r in rows}):
        task_rows = [r for r in rows if r.task == task]
        png = pareto_picture(task, task_rows, out / picture_name(task))
        tasks.append({"table": board_table(task, task_rows), "picture": png.name if png else None})
    index = out / "index.html"
    write_text(index, pages.render("leaderboard_index.html", title=title, submissions=len(checks),
                                   validated=sum(c.validated for c in checks), imported=len(imported),
                                   families=sorted({r.family for r in rows}), methods=sorted({r.method for r in rows}),
                                   tasks=tasks))
    return index
