"""``unlearn export-ou``: write one of our lm-eval runs as an open-unlearning evaluation folder
(:mod:`unlearn_app.open_unlearning.writer`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from unlearn_app import output_guard
from unlearn_app.commands import error

ORDER = 35


def _cmd_export_ou(args: argparse.Namespace) -> int:
    from harness_ext.results import ResultsFileError
    from unlearn_app.open_unlearning.reader import ou_folders_under
    from unlearn_app.open_unlearning.writer import ExportError, export_run
    from unlearn_app.reports.tables import collect_runs

    try:
        runs = collect_runs([args.run])
    except (FileNotFoundError, ResultsFileError, ValueError) as e:
        return error(str(e))
    ours = [f for _, f in runs if f.is_file()]
    if not ours and ou_folders_under(args.run):
        return error(f"{args.run} is already an open-unlearning evaluation folder; export-ou writes one from an "
                     "lm-eval run of ours: give its results_*.json file or the output folder of one model.")
    if len(ours) != 1:
        found = ", ".join(str(f) for _, f in runs) or "none"
        return error(f"{args.run}: give one lm-eval results_*.json file or the output folder of one model (runs "
                     f"found: {found}).")
    out = Path(args.out).expanduser()
    try:
        with output_guard.replaced_folder(out) as folder:  # --overwrite replaces the folder as a whole
            written = [out / p.relative_to(folder) for p in export_run(ours[0], folder)]
    except (ExportError, OSError, ValueError) as e:
        return error(str(e))
    for path in written:
        print(path)
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("export-ou", help="Write an lm-eval run of ours as an open-unlearning evaluation folder.",
                       description="Write the TOFU / MUSE tasks of RUN as open-unlearning's evaluator writes them "
                       "(TOFU_EVAL.json with per-item value_by_index where the run kept them, and TOFU_SUMMARY.json; "
                       "MUSE likewise), for open-unlearning's plotting scripts. Per-item values come from lm-eval's "
                       "samples files (--log_samples) and the run's reference record; see docs/open-unlearning.md.")
    p.add_argument("run", metavar="RUN", help="An lm-eval results_*.json file or the output folder of one model.")
    p.add_argument("--out", required=True, help="The folder to write (one sub-folder per task when RUN has several); "
                   "with --overwrite an existing folder is replaced as a whole.")
    p.set_defaults(func=_cmd_export_ou)
    output_guard.declare(p, outputs=["out"], scanned={"run": (*output_guard.RUN_FILES, "samples_*.jsonl")}, folders=["out"])
