"""``unlearn report RUNS... --html report.html``: one self-contained HTML file (no external resources; plots are
embedded as base64 PNG) with the metric tables, the checks of ``unlearn ci`` runs, the plots of the benchmarks
present (TOFU Forget Quality vs Model Utility, per-format gaps, WaterDrum strengths, deep-unlearning recall vs
accuracy) and each run's provenance, with a warning where compared runs differ.

The page is the template ``report.html`` (:mod:`unlearn_app.pages`); the functions here prepare its data as plain
text: tables, checks, provenance, figures (PNG data URIs)."""

from __future__ import annotations

import base64
import datetime
import math
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from markupsafe import Markup

from unlearn_app import pages
from unlearn_app.pages import PNG_URI
from unlearn_app.reports import plots
from unlearn_app.reports.evaluated_run import Run, provenance_differences, provenance_rows
from unlearn_app.reports.numbers import format_number
from unlearn_app.reports.tables import task_tables


def _png(draw: Callable[[Path], object]) -> str:
    """Run ``draw(path)`` into a temporary PNG and return it as a data URI."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plot.png"
        draw(path)
        return PNG_URI + base64.b64encode(path.read_bytes()).decode("ascii")


def _figure(title: str, uri: str) -> dict[str, str]:
    return {"title": title, "uri": uri}


def _nan(x: float | None) -> float:
    return math.nan if x is None else x


def plot_sections(runs: list[Run]) -> list[dict[str, str]]:
    """The figures for the benchmarks present in the runs: title and PNG data URI each."""
    figures = []
    tasks = sorted({t for r in runs for t in r.metrics})
    for task in tasks:
        models = {r.name: r.metrics[task] for r in runs if task in r.metrics}
        if any("forget_quality" in m and "model_utility" in m for m in models.values()):
            title = f"{task}: Forget Quality vs Model Utility"
            figures.append(_figure(title, _png(lambda p, m=models, t=title: plots.forget_quality_vs_utility(m, p, t))))
    gaps = {t: {r.name: r.metrics[t]["forget_retain_gap"] for r in runs if "forget_retain_gap" in r.metrics.get(t, {})}
            for t in tasks}
    gaps = {t: v for t, v in gaps.items() if v}
    if gaps:
        title = "Per-format gap (forget - retain; negative = forgotten)"
        figures.append(_figure(title, _png(lambda p: plots.grouped_bars(gaps, p, title, "forget - retain"))))
    for task in tasks:
        strengths = {m: {r.name: r.metrics[task][m] for r in runs if m in r.metrics.get(task, {})}
                     for m in ("forget_strength", "retain_strength", "other_id_strength")}
        strengths = {m: v for m, v in strengths.items() if v}
        if "forget_strength" in strengths:
            title = f"{task}: WaterDrum watermark strength"
            figures.append(_figure(title, _png(lambda p, s=strengths, t=title: plots.grouped_bars(s, p, t, "strength"))))
    for task in tasks:
        points = {r.name: (_nan(r.metrics[task].get("recall")), _nan(r.metrics[task].get("acc_all")))
                  for r in runs if "recall" in r.metrics.get(task, {}) and "acc_all" in r.metrics.get(task, {})}
        if points:
            title = f"{task}: deep unlearning, recall vs accuracy"
            figures.append(_figure(title, _png(lambda p, pts=points, t=title: plots.labelled_scatter(
                pts, p, t, "Recall (deep unlearning; lower is better)", "Accuracy on other facts (higher is better)"))))
    return figures


def metric_tables(runs: list[Run]) -> list[dict[str, Any]]:
    """One table per task, rows in the order of the Markdown report (:func:`unlearn_app.reports.tables.task_tables`):
    its task, run names and (label, formatted values) rows."""
    return [{"task": task, "runs": list(models),
             "rows": [(label, [format_number(m.get(key)) for m in models.values()]) for key, label in table_rows]}
            for task, models, table_rows in task_tables({r.name: r.metrics for r in runs})]


def checks_tables(runs: list[Run]) -> list[dict[str, Any]]:
    """Per ``unlearn ci`` run: its name, a summary line and its checks (passed, expression, value, bound)."""
    parts = []
    for run in runs:
        if not run.checks:
            continue
        failed = sum(not c.get("passed") for c in run.checks)
        parts.append({"run": run.name,
                      "summary": f"{failed} of {len(run.checks)} checks failed" if failed
                      else f"all {len(run.checks)} checks passed",
                      "checks": [{"passed": bool(c.get("passed")), "check": str(c.get("check")),
                                  "value": format_number(c.get("value")), "bound": format_number(c.get("bound"))}
                                 for c in run.checks]})
    return parts


def provenance_tables(runs: list[Run]) -> list[dict[str, Any]]:
    """Per run: its name, results file and (task, field, value) provenance rows."""
    return [{"run": run.name, "results_file": run.results_file, "rows": provenance_rows(run)} for run in runs]


def render_html(runs: list[Run], title: str = "Unlearning evaluation report", sections: Sequence[Markup] = ()) -> str:
    """The whole page as one string. ``sections`` come first: parts rendered by :func:`unlearn_app.pages.fragment`
    (a sweep's leaderboard, say); a plain string among them is shown as text, not markup."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return pages.render("report.html", title=title, runs=[r.name for r in runs], stamp=stamp,
                        warnings=[p for r in runs for p in r.partial] + provenance_differences(runs),
                        notes=[n for r in runs for n in r.notes],
                        sections=list(sections), checks=checks_tables(runs), figures=plot_sections(runs),
                        tables=metric_tables(runs), provenance=provenance_tables(runs))


def write_html(runs: list[Run], path: str | Path) -> Path:
    from unlearn_app.output_guard import write_text

    path = Path(path)
    write_text(path, render_html(runs))
    return path
