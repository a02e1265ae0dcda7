"""``unlearn submit``: build a leaderboard submission from runs, validate it, and upload it to a Hub dataset (or a folder)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from unlearn_app import output_guard
from unlearn_app.commands import error

ORDER = 55


def _cmd_submit(args: argparse.Namespace) -> int:
    from harness_ext.results import ResultsFileError
    from unlearn_app.leaderboard import store
    from unlearn_app.leaderboard.submission import SubmissionError, build
    from unlearn_app.leaderboard.validate import check_folder

    if args.private:  # the flag of the old default (public); uploads are private unless --public now
        if args.public:
            return error("--private and --public contradict each other; give --public for a public dataset")
        print("unlearn submit: --private is the default now (as for `unlearn run` and `unlearn push`); the flag can "
              "go", file=sys.stderr)
    if (args.repo is None) == (args.to is None):
        return error("give one destination: --repo OWNER/DATASET (a Hub dataset) or --to DIR (a local folder)")
    if args.repo is not None and not store.HUB_ID.fullmatch(args.repo):
        return error(f"--repo {args.repo!r} is not a Hub dataset id OWNER/NAME")
    if args.to is not None and Path(args.to).exists() and not Path(args.to).is_dir():
        return error(f"--to {args.to} is a file; --to takes a leaderboard folder (submissions/<id>/ are written in it)")
    params = {}
    for item in args.param or []:
        if "=" not in item:
            return error(f"--param expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        if key.strip() in params:
            return error(f"--param gives {key.strip()!r} twice ({params[key.strip()]!r} and {value.strip()!r}); give "
                         "each key once")
        params[key.strip()] = value.strip()
    try:
        built = build(args.runs, reference=args.reference, model_id=args.model_id, revision=args.revision,
                      model_dir=args.model_dir, family=args.family, method=args.method, hyperparameters=params,
                      submitter=args.submitter or "", notes=args.notes or "")
    except (SubmissionError, ResultsFileError, FileNotFoundError) as e:
        return error(str(e))
    for line in built.notes:
        print(f"unlearn submit: {line}", file=sys.stderr)
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:  # validated exactly as `unlearn leaderboard validate` will
        check = check_folder(store.save_local(built, tmp))
    if check.refused:  # a submission this package built, refused: a name the board cannot take (a task's, say)
        return error(check.errors[0])
    for line in check.errors:
        print(line, file=sys.stderr)
    for line in check.notes:
        print(f"unlearn submit: {line}", file=sys.stderr)
    if check.errors and not args.allow_mismatch:
        print(f"unlearn submit: {built.id} does not validate ({len(check.errors)} problem(s)); nothing uploaded",
              file=sys.stderr)
        return 1
    recomputed = sum(len(v) for v in check.recomputed.values())
    unverified = sum(len(v) for v in check.unverified.values())
    print(f"submission {built.id}: {check.status}; {recomputed} aggregate(s) recomputed from per-item values, "
          f"{unverified} unverified")
    try:
        if args.to is not None:
            print(f"written: {store.save_local(built, args.to)}")
        else:
            print(f"uploaded: {store.upload(built, args.repo, private=not args.public)}")
    except store.StoreError as e:
        return error(str(e))
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "submit", help="Build a leaderboard submission from runs, validate it, and upload it to a Hub dataset.",
        description="Build one submission (one model: its method, hyperparameters, results, the per-item values each "
        "aggregate needs, the reference run, task and package versions) from RUN..., recompute every aggregate from "
        "its per-item values, and upload it as one commit into the Hub dataset --repo (submissions/<id>/), or write "
        "it into --to DIR. A failed upload is resumed by running the same command again; a submission already there "
        "is refused. Exit status: 0 submitted, 1 it does not validate, 2 bad input.")
    p.add_argument("runs", nargs="+", metavar="RUN", help="An `unlearn run` checkpoint folder (with eval/), lm_eval "
                   "--output_path folders or results files (with --log_samples for per-item values), or "
                   "open-unlearning evaluation folders.")
    p.add_argument("--repo", help="Hub dataset id OWNER/NAME to upload into (created if absent).")
    p.add_argument("--to", metavar="DIR", help="A local leaderboard folder to write into instead (same layout).")
    p.add_argument("--reference", metavar="DIR", help="The retain run (lm-eval output with --log_samples, or an "
                   "open-unlearning folder) that Forget Quality and PrivLeak are computed against; its per-item "
                   "values are stored with the submission.")
    p.add_argument("--model-id", dest="model_id", help="Hub id of the unlearned model (with --revision).")
    p.add_argument("--revision", help="The model's Hub commit sha (40 hex digits).")
    p.add_argument("--model-dir", dest="model_dir", help="A local model folder, recorded by its content hash "
                   "(default: the `unlearn run` folder among the RUNs).")
    p.add_argument("--family", help="The model family (default: the base model of the run's config, or the model name).")
    p.add_argument("--method", help="Method name (default: the run config's).")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", help="A hyperparameter to record (repeatable; "
                   "goes over the run config's method_params).")
    p.add_argument("--submitter", help="Who submits (free text).")
    p.add_argument("--notes", help="Free text shown on the submission's page.")
    p.add_argument("--public", action="store_true", help="Create --repo public when it does not exist yet (default "
                   "private, as for `unlearn run --push-to-hub` and `unlearn push`; a dataset that exists keeps its "
                   "visibility).")
    p.add_argument("--private", action="store_true", help=argparse.SUPPRESS)  # the old flag, now the default
    p.add_argument("--allow-mismatch", dest="allow_mismatch", action="store_true",
                   help="Upload even when a number does not follow from its per-item values (the board's validation "
                   "will still refuse it).")
    p.set_defaults(func=_cmd_submit)
    output_guard.declare(p, outputs=["to"], inputs=["reference", "model_dir"], scanned={"runs": ("results*.json",)},
                         folders=["to"], existing_needs_overwrite=False)
