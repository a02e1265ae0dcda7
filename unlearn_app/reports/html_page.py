"""``unlearn report RUNS... --html report.html``: one self-contained HTML file (no external resources; plots are
embedded as base64 PNG) with the metric tables, the checks of ``unlearn ci`` runs, the plots of the benchmarks
present (TOFU Forget Quality vs Model Utility, per-format gaps, WaterDrum strengths, deep-unlearning recall vs
accuracy) and each run's provenance, with a warning where compared runs differ."""

from __future__ import annotations

import base64
import datetime
import html
import math
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from unlearn_app.reports import plots
from unlearn_app.reports.evaluated_run import Run, provenance_differences, provenance_rows
from unlearn_app.reports.numbers import format_number
from unlearn_app.reports.tables import task_tables

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.pass td.verdict { color: #116611; font-weight: bold; }
tr.fail td.verdict { color: #b00020; font-weight: bold; }
.warnings { background: #fff4e5; border-left: 4px solid #f0a020; padding: 0.5em 1em; }
figure { display: inline-block; margin: 0.5em; } figcaption { font-size: 0.85em; color: #555; }
code { font-size: 0.9em; }
"""


def _escape(x: object) -> str:
    """``x`` as text safe inside HTML."""
    return html.escape(str(x))


def table(head: Iterable[object], rows: Iterable[str], attrs: str = "") -> str:
    """``<table ATTRS>`` with a header row of ``head`` (escaped) and the ``<tr>`` rows given."""
    return f"<table{attrs}><tr>{''.join(f'<th>{_escape(h)}</th>' for h in head)}</tr>{''.join(rows)}</table>"


def row(cells: Iterable[object]) -> str:
    """A ``<tr>`` of plain cells (escaped)."""
    return "<tr>" + "".join(f"<td>{_escape(c)}</td>" for c in cells) + "</tr>"


def _png(draw: Callable[[Path], object]) -> str:
    """Run ``draw(path)`` into a temporary PNG and return it as a data URI."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plot.png"
        draw(path)
        return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _figure(title: str, uri: str) -> str:
    return f'<figure><img alt="{_escape(title)}" src="{uri}"><figcaption>{_escape(title)}</figcaption></figure>'


def _nan(x: float | None) -> float:
    return math.nan if x is None else x


def plot_sections(runs: list[Run]) -> list[str]:
    """The figures for the benchmarks present in the runs."""
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


def metric_tables(runs: list[Run]) -> list[str]:
    """One table per task, rows in the order of the Markdown report (:func:`unlearn_app.reports.tables.task_tables`)."""
    parts = []
    for task, models, table_rows in task_tables({r.name: r.metrics for r in runs}):
        rows = []
        for key, label in table_rows:
            cells = "".join(f'<td class="num">{_escape(format_number(m.get(key)))}</td>' for m in models.values())
            rows.append(f"<tr><td>{_escape(label)}</td>{cells}</tr>")
        parts.append(f'<h3 id="task-{_escape(task)}">{_escape(task)}</h3>'
                     + table(["metric", *models], rows, f' class="metrics" data-task="{_escape(task)}"'))
    return parts


def checks_tables(runs: list[Run]) -> list[str]:
    parts = []
    for run in runs:
        if not run.checks:
            continue
        rows = []
        for c in run.checks:
            verdict = "pass" if c.get("passed") else "FAIL"
            value, bound = format_number(c.get("value")), format_number(c.get("bound"))
            rows.append(f'<tr class="{"pass" if c.get("passed") else "fail"}"><td class="verdict">{verdict}</td>'
                        f'<td><code>{_escape(c.get("check"))}</code></td><td class="num">{_escape(value)}</td>'
                        f'<td class="num">{_escape(bound)}</td></tr>')
        failed = sum(not c.get("passed") for c in run.checks)
        summary = f"{failed} of {len(run.checks)} checks failed" if failed else f"all {len(run.checks)} checks passed"
        parts.append(f"<h3>{_escape(run.name)}: {summary}</h3>"
                     + table(["result", "check", "value", "bound"], rows, ' class="checks"'))
    return parts


def provenance_tables(runs: list[Run]) -> list[str]:
    parts = []
    for run in runs:
        rows = [row(r) for r in provenance_rows(run)]
        body = (table(["task", "field", "value"], rows, ' class="provenance"') if rows
                else "<p>No provenance recorded in this results file.</p>")
        parts.append(f"<h3>{_escape(run.name)}</h3><p><code>{_escape(run.results_file)}</code></p>{body}")
    return parts


def render_html(runs: list[Run], title: str = "Unlearning evaluation report", sections: list[str] = ()) -> str:
    """The whole page as one string; ``sections`` (HTML, e.g. a sweep's leaderboard) come first."""
    warnings = provenance_differences(runs)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_escape(title)}</title>"
           f"<style>{STYLE}</style></head><body>",
           f"<h1>{_escape(title)}</h1><p>{len(runs)} run(s): {', '.join(_escape(r.name) for r in runs)}. Generated {stamp} "
           "by lm-eval-unlearning.</p>"]
    if warnings:
        items = "".join(f"<li>{_escape(w)}</li>" for w in warnings)
        out.append(f'<div class="warnings" id="warnings"><strong>The runs are not strictly comparable:</strong>'
                   f"<ul>{items}</ul></div>")
    notes = [n for r in runs for n in r.notes]
    if notes:
        items = "".join(f"<li>{_escape(n)}</li>" for n in notes)
        out.append(f'<div class="warnings" id="notes"><strong>open-unlearning values that disagree with their '
                   f"recomputation (the tables show the recomputed values), or were not recomputed:</strong><ul>{items}</ul></div>")
    out += list(sections)
    checks = checks_tables(runs)
    if checks:
        out += ['<h2 id="checks">Checks</h2>', *checks]
    figures = plot_sections(runs)
    if figures:
        out += ['<h2 id="plots">Plots</h2>', *figures]
    out += ['<h2 id="metrics">Metrics</h2>', *metric_tables(runs)]
    out += ['<h2 id="provenance">Provenance</h2>', *provenance_tables(runs), "</body></html>"]
    return "\n".join(out)


def write_html(runs: list[Run], path: str | Path) -> Path:
    from unlearn_app.output_guard import write_text

    path = Path(path)
    write_text(path, render_html(runs))
    return path
