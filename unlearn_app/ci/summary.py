"""The Markdown summary of an ``unlearn ci`` run (also appended to ``$GITHUB_STEP_SUMMARY``)."""

from __future__ import annotations

import json
from typing import Any

from unlearn_app.reports.numbers import MISSING, format_number
from unlearn_app.reports.tables import compare_runs


def model_args_text(model_args: Any) -> str:
    """lm-eval's model arguments as a user gives them to ``lm_eval --model_args``: ``pretrained=DIR,peft=ADAPTER``
    (a results file holds them as a mapping, or as that string); a value that is itself a mapping or a list (e.g.
    ``chat_template_args``) as JSON."""
    if not isinstance(model_args, dict):
        return str(model_args)
    return ",".join(f"{k}={v if isinstance(v, (str, int, float, bool)) or v is None else json.dumps(v)}"
                    for k, v in model_args.items())


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
    name = model_args_text(model.get("name", ""))  # a mapping in results.json written before it was a string
    prov = record.get("provenance") or {}
    cache = prov.get("cache") or {}
    lines = [f"## unlearn ci: {name}", "", verdict, ""]
    lines += [f"- model: `{name}` ({model['backend'] + ', ' if model.get('backend') else ''}revision "
              f"`{model.get('revision') or 'unpinned'}`)",
              f"- suite: `{record.get('suite')}`",
              *([f"- sweep `{sweep['dir']}`: trial `{sweep['id']}` ({sweep['method']}, seed {sweep['seed']}), "
                 f"selected by `{sweep.get('selected_by') or 'its only setting'}`"] if (sweep := record.get("sweep"))
                else []),
              f"- results: read from `{record['from_results']}`" if record.get("from_results") else
              f"- results: {'from the cache' if cache.get('hit') else 'evaluated now' if record.get('results') else 'none'}"
              + (f" (key `{cache['key'][:12]}`)" if cache.get("key") else ""),
              *[f"- **partial evaluation**: `{task}` on {how}: not the whole task's numbers"
                for task, how in (record.get("partial") or {}).items()],
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
