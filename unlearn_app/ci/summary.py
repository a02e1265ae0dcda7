"""The Markdown summary of an ``unlearn ci`` run (also appended to ``$GITHUB_STEP_SUMMARY``)."""

from __future__ import annotations

from typing import Any

from unlearn_app.reports.numbers import MISSING, format_number
from unlearn_app.reports.tables import compare_runs


def checks_table(checks: list[dict[str, Any]]) -> str:
    lines = ["| | check | value | bound |", "|---|---|---:|---:|"]
    for c in checks:
        mark = "✅ pass" if c["passed"] else "❌ FAIL"
        lines.append(f"| {mark} | `{c['check']}` | {format_number(c['value'])} | {format_number(c['bound'])} |")
    return "\n".join(lines)


def markdown_summary(record: dict[str, Any]) -> str:
    """``record`` is the content of ``results.json`` written by ``unlearn ci``."""
    checks = record.get("checks") or []
    failed = [c for c in checks if not c["passed"]]
    if record.get("error"):
        verdict = f"**error**: {record['error']}"
    elif failed:
        verdict = f"**{len(failed)} of {len(checks)} checks failed**"
    else:
        verdict = f"**all {len(checks)} checks passed**"
    model = record.get("model") or {}
    prov = record.get("provenance") or {}
    cache = prov.get("cache") or {}
    lines = [f"## unlearn ci: {model.get('name', '')}", "", verdict, ""]
    lines += [f"- model: `{model.get('name')}` (revision `{model.get('revision') or 'unpinned'}`)",
              f"- suite: `{record.get('suite')}`",
              *([f"- sweep `{sweep['dir']}`: trial `{sweep['id']}` ({sweep['method']}, seed {sweep['seed']}), "
                 f"selected by `{sweep.get('selected_by') or 'its only setting'}`"] if (sweep := record.get("sweep"))
                else []),
              f"- results: {'from the cache' if cache.get('hit') else 'evaluated now' if record.get('results') else 'none'}"
              + (f" (key `{cache['key'][:12]}`)" if cache.get("key") else "")
              + (f", read from `{record['from_results']}`" if record.get("from_results") else ""),
              f"- lm-eval-unlearning {prov.get('software', {}).get('version')}, git "
              f"`{prov.get('software', {}).get('git_commit') or MISSING}`", ""]
    if checks:
        lines += ["### Checks", "", checks_table(checks), ""]
    results = record.get("results") or {}
    if results:
        runs = {"this run": results}
        if record.get("baseline_results"):
            runs["baseline"] = record["baseline_results"]
        lines += ["### Metrics", "", compare_runs(runs).replace("\n## ", "\n#### ").replace("## ", "#### ", 1)]
    return "\n".join(lines).rstrip() + "\n"
