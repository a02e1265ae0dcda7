"""The leaderboard's static site: ``index.html`` (one sortable table per task, filters by model family and method,
the forget-vs-utility picture with its Pareto front), ``submissions/<id>.html`` (provenance, what was recomputed,
downloads) and ``data/<id>/`` (the submission's files). No server, nothing fetched from elsewhere: it can be served
by GitHub Pages or a static Hub Space as it is."""

from __future__ import annotations

import hashlib
import html
import math
import re
import shutil
from pathlib import Path
from typing import Any

from unlearn_app.leaderboard.importers import Row
from unlearn_app.leaderboard.publish import publish
from unlearn_app.leaderboard.validate import Check

#: Per benchmark: (utility metric, its better direction, forget metric, its better direction) of the picture.
AXES = {"tofu": ("model_utility", "max", "forget_quality", "max"),
        "muse": ("retain_knowmem", "max", "forget_verbmem", "min")}
#: Metrics shown first in a table, when present.
FIRST = ("forget_quality", "model_utility", "forget_verbmem", "forget_knowmem", "retain_knowmem", "privleak")

STYLE = """body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child,th:first-child{text-align:left}
th{cursor:pointer;background:#f3f3f3}.recomputed{background:#e8f6e8}.failed{background:#fbe3e3}
.unverifiable{color:#777}.status{text-align:left}img{max-width:600px}"""
SCRIPT = """
function sortTable(th){const table=th.closest('table');const i=Array.from(th.parentNode.children).indexOf(th);
const asc=th.dataset.order!=='asc';table.querySelectorAll('th').forEach(h=>delete h.dataset.order);
th.dataset.order=asc?'asc':'desc';const body=table.tBodies[0];const rows=Array.from(body.rows);
const key=r=>{const t=r.cells[i].dataset.value??r.cells[i].textContent;const n=parseFloat(t);return isNaN(n)?t:n;};
rows.sort((a,b)=>{const x=key(a),y=key(b);const c=(typeof x==='number'&&typeof y==='number')?x-y:String(x).localeCompare(String(y));
return asc?c:-c;});rows.forEach(r=>body.appendChild(r));}
function applyFilters(){const f=document.getElementById('family').value,m=document.getElementById('method').value;
document.querySelectorAll('tr[data-family]').forEach(r=>{r.hidden=(f&&r.dataset.family!==f)||(m&&r.dataset.method!==m);});}
document.querySelectorAll('th').forEach(th=>th.addEventListener('click',()=>sortTable(th)));
document.getElementById('family').addEventListener('change',applyFilters);
document.getElementById('method').addEventListener('change',applyFilters);
"""


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


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


def _page(title: str, body: str, script: str = "") -> str:
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{STYLE}</style></head><body>{body}{f'<script>{script}</script>' if script else ''}</body></html>\n")


def _table(task: str, rows: list[Row], prefix: str = "") -> str:
    metrics = sorted({m for r in rows for m in r.metrics}, key=lambda m: (m not in FIRST, FIRST.index(m) if m in FIRST else 0, m))
    head = "".join(f"<th>{_e(h)}</th>" for h in ["model", "family", "method", "status", *metrics, "source"])
    body = []
    for r in rows:
        name = f'<a href="{_e(prefix + r.page)}">{_e(r.model)}</a>' if r.page else _e(r.model)
        cells = [f"<td>{name}</td><td>{_e(r.family)}</td><td>{_e(r.method)}</td>",
                 f'<td class="status {r.status}">{_e(r.status)}</td>']
        for m in metrics:
            v = r.metrics.get(m)
            cls = ' class="recomputed" title="recomputed from the per-item values"' if m in r.recomputed else ""
            if m in r.unverified:
                cls = ' class="unverifiable" title="not recomputed: no per-item values for it"'
            if m in r.mismatched:
                cls = ' class="failed" title="the per-item values give another number"'
            cells.append(f'<td{cls} data-value="{"" if v is None else v}">{_fmt(v)}</td>')
        cells.append(f'<td class="status">{_e(r.source)}</td>')
        body.append(f'<tr data-family="{_e(r.family)}" data-method="{_e(r.method)}">{"".join(cells)}</tr>')
    return (f'<table class="board" id="table-{_e(task)}"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


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


def _submission_page(check: Check, files: list[str]) -> str:
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
    parts = [f"<h1>{_e(check.id)}</h1>", '<p><a href="../index.html">back to the leaderboard</a></p>',
             "<h2>Provenance</h2><table>" + "".join(f"<tr><th>{_e(k)}</th><td class=\"status\">{_e(v)}</td></tr>"
                                                   for k, v in facts) + "</table>"]
    if check.errors:
        parts.append("<h2>Problems</h2><ul>" + "".join(f"<li>{_e(e)}</li>" for e in check.errors) + "</ul>")
    for task, entry in sorted((r.get("results") or {}).items()):
        parts.append(f"<h2>{_e(task)}</h2><p>run {_e(entry.get('run'))} ({_e(entry.get('kind'))}), task version "
                     f"{_e(entry.get('version'))}</p>")
        rows = []
        for metric, value in sorted((entry.get("aggregates") or {}).items()):
            again = check.recomputed.get(task, {}).get(metric)
            mark = "recomputed" if again is not None else "unverifiable"
            if metric in check.mismatched.get(task, []):
                mark = "failed"
            rows.append(f'<tr><td>{_e(metric)}</td><td>{_fmt(value)}</td><td class="{mark}">{_fmt(again)}</td>'
                        f'<td class="status">{mark}</td></tr>')
        parts.append("<table><thead><tr><th>metric</th><th>submitted</th><th>recomputed</th><th>check</th></tr></thead>"
                     f"<tbody>{''.join(rows)}</tbody></table>")
    links = "".join(f'<li><a href="../data/{_e(check.id)}/{_e(f)}">{_e(f)}</a></li>' for f in files)
    parts.append(f"<h2>Downloads</h2><ul>{links}</ul>")
    return _page(check.id, "".join(parts))


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
    families = sorted({r.family for r in rows})
    methods = sorted({r.method for r in rows})
    select = lambda name, values: (f'<label>{name} <select id="{name}"><option value="">all</option>'  # noqa: E731
                                   + "".join(f'<option value="{_e(v)}">{_e(v)}</option>' for v in values) + "</select></label> ")
    parts = [f"<h1>{_e(title)}</h1>",
             f"<p>{len(checks)} submission(s), {sum(c.validated for c in checks)} validated by recomputing every number from "
             f"its per-item values; {len(imported)} imported row(s). Green cells were recomputed; rows marked "
             "<em>unverifiable</em> carry no per-item values. Click a column to sort.</p>",
             "<p>" + select("family", families) + select("method", methods) + "</p>"]
    for task in sorted({r.task for r in rows}):
        task_rows = [r for r in rows if r.task == task]
        parts.append(f'<h2 id="{_e(task)}">{_e(task)}</h2>' + _table(task, task_rows))
        png = pareto_picture(task, task_rows, out / picture_name(task))
        if png is not None:
            parts.append(f'<p><img src="{_e(png.name)}" alt="{_e(task)}: forget vs utility with the Pareto front"></p>')
    index = out / "index.html"
    write_text(index, _page(title, "".join(parts), SCRIPT))
    return index
