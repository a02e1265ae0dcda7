"""``unlearn report``: side-by-side table (and plot, HTML) of several lm-eval runs' results."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from unlearn_app import output_guard
from unlearn_app.commands import error

ORDER = 30


def _cmd_report(args: argparse.Namespace) -> int:
    import json

    from harness_ext.results import ResultsFileError, json_safe
    from unlearn_app.reports.evaluated_run import load_run, provenance_differences, provenance_markdown
    from unlearn_app.reports.plots import forget_quality_vs_utility
    from unlearn_app.reports.tables import collect_runs, compare_runs

    if args.reference and not Path(args.reference).expanduser().exists():
        return error(f"--reference {args.reference} does not exist; give the retain run's open-unlearning folder or "
                     "lm-eval output folder.")
    try:
        sources = collect_runs(args.runs, args.names.split(",") if args.names else None)
        loaded = [load_run(file, name, args.reference) for name, file in sources]
    except (FileNotFoundError, ResultsFileError, ValueError) as e:
        return error(str(e))
    runs = {r.name: r.metrics for r in loaded}
    plots = plot_paths(runs, args.plot) if args.plot else {}
    try:  # the plot files are known only now: checked like the declared outputs, before anything is written
        output_guard.check(args, [("plot", path) for path in plots.values()])
    except output_guard.OutputClash as e:
        return error(str(e))
    warnings = provenance_differences(loaded)
    notes = [n for r in loaded for n in r.notes]
    partial = [p for r in loaded for p in r.partial]
    for w in partial + warnings + notes:
        print(f"warning: {w}", file=sys.stderr)
    listing = "\n".join(f"- {name}: {file}" for name, file in sources)
    text = compare_runs(runs) + "\n" + provenance_markdown(loaded)
    if partial:
        text += ("\n**Partial evaluations** (lm_eval --limit: their numbers are not those of the whole task, nor "
                 "comparable with a whole evaluation's):\n\n") + "\n".join(f"- {p}" for p in partial) + "\n"
    if warnings:
        text += "\n**Provenance differs:**\n\n" + "\n".join(f"- {w}" for w in warnings) + "\n"
    if notes:
        text += ("\n**open-unlearning values that disagree with their recomputation, or were not recomputed from "
                 "their per-item values:**\n\n") + "\n".join(
            f"- {n}" for n in notes) + "\n"
    text += f"\nRuns read:\n\n{listing}\n"
    print(text)
    if args.out:
        output_guard.write_text(args.out, text)
    if args.json:
        output_guard.write_text(args.json, json.dumps(json_safe(runs), indent=2))
    for task, path in plots.items():
        models = {n: r[task] for n, r in runs.items() if task in r and "forget_quality" in r[task]}
        print(f"plot: {forget_quality_vs_utility(models, path, task)}")
    if args.html:
        from unlearn_app.reports.html_page import write_html

        print(f"html: {write_html(loaded, args.html)}")
    return 0


def plot_paths(runs: dict[str, dict[str, dict[str, float]]], plot: str) -> dict[str, Path]:
    """The Forget Quality vs Model Utility plot of each task that has Forget Quality: ``plot`` itself when the runs
    have one task, else ``<stem>_<task><suffix>`` beside it."""
    tasks = sorted({t for r in runs.values() for t in r})
    path = Path(plot)
    return {task: path if len(tasks) == 1 else path.with_stem(f"{path.stem}_{task}") for task in tasks
            if any("forget_quality" in r.get(task, {}) for r in runs.values())}


def add_parsers(sub) -> None:
    p = sub.add_parser("report", help="Side-by-side table (and plot) of several lm-eval runs' results.",
                       description="Read each RUN (an lm_eval --output_path folder, a results_*.json file, an `unlearn ci` "
                       "output folder or an open-unlearning evaluation folder) and print one table per task with a column per run, then the results file read for each "
                       "column; warn when the runs' provenance (package version, data, metric modes, reference run) differs. A "
                       "folder holding several models' runs gives one column per model folder (its newest results file).")
    p.add_argument("runs", nargs="+", metavar="RUN", help="lm-eval output folders or results_*.json files, or "
                   "open-unlearning evaluation folders (TOFU_EVAL.json / MUSE_EVAL.json and their SUMMARY).")
    p.add_argument("--reference", metavar="DIR", help="A retain run (an lm-eval output folder of ours or an "
                   "open-unlearning folder): the open-unlearning runs' Forget Quality and PrivLeak are recomputed "
                   "against it from their per-item values.")
    p.add_argument("--names", help="Comma-separated column names (default: the shortest distinct ends of the paths).")
    p.add_argument("--out", help="Also write the Markdown to this file.")
    p.add_argument("--json", help="Also write {run: {task: {metric: value}}} as JSON (NaN as null).")
    p.add_argument("--plot", help="PNG path for the Forget Quality vs Model Utility plot (TOFU tasks; with several "
                   "tasks, one plot per task: the name with _TASK added before the suffix).")
    p.add_argument("--html", help="Write one self-contained HTML report (tables, plots, checks of `unlearn ci` "
                   "folders, provenance) to this path.")
    p.set_defaults(func=_cmd_report)
    output_guard.declare(p, outputs=["out", "json", "plot", "html"], inputs=["reference"], scanned={"runs": output_guard.RUN_FILES},
                         suffixes={"plot": output_guard.IMAGE_SUFFIXES})
