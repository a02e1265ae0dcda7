"""``unlearn ci``: evaluate a checkpoint on a suite of lm-eval tasks and checks (exit 0 pass, 1 fail, 2 error)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from unlearn_app import output_guard
from unlearn_app.argtypes import positive_int
from unlearn_app.commands import error

ORDER = 90


def _cmd_ci(args: argparse.Namespace) -> int:
    """The command; any error is exit 2, since exit 1 means "a check failed" to a CI system."""
    try:
        return _ci(args)
    except Exception as e:  # noqa: BLE001 - an error here must never read as a failed check (exit 1)
        from unlearn_app.ci.runner import _bounded

        return _refuse(args, _bounded(f"internal error ({type(e).__name__}: {e}); please report it"), every=False)


def _refuse(args: argparse.Namespace, message: str, every: bool = True) -> int:
    """An error before the run starts: printed (exit 2); under a launcher, whose exit status is 1 for any failure,
    also recorded by the main process in ``OUT/results.json``, which then alone tells it from a failed check. (In one
    process the exit status tells, and nothing is written, so the corrected command needs no --overwrite.)
    ``every``: the error is one of the command line, met by every process alike; the others then exit 0 and leave
    the report to the main one (a process that failed first would stop the launch before it is written)."""
    from harness_ext.evaluate import is_main_process
    from unlearn_app.ci import runner

    if runner.launched():
        if not is_main_process():
            return 0 if every else error(message)
        runner.record_error(Path(args.out), {"suite": args.suite, "model": {"name": args.model or args.from_results}},
                            message)
    return error(message)


def _ci(args: argparse.Namespace) -> int:
    from harness_ext.evaluate import is_main_process
    from unlearn_app.ci import runner
    from unlearn_app.ci.runner import CiOptions

    try:
        model_args = json.loads(args.model_args) if args.model_args else {}
    except json.JSONDecodeError as e:
        return _refuse(args, f"--model-args must be a JSON object, e.g. '{{\"dtype\": \"bfloat16\"}}' ({e.msg})")
    if not isinstance(model_args, dict):
        return _refuse(args, "--model-args must be a JSON object")
    sweep = None
    if args.method and not args.from_sweep:
        return _refuse(args, "--method picks a method of --from-sweep DIR; give --from-sweep")
    if args.from_sweep:
        if args.model or args.from_results:
            return _refuse(args, "--from-sweep picks the model and its results; drop --model / --from-results")
        from unlearn_app.sweep.best import NoTrial, best_trial

        try:
            trial = best_trial(args.from_sweep, args.method)
        except NoTrial as e:
            return _refuse(args, str(e))
        except Exception as e:  # noqa: BLE001  (exit 1 means a check failed: anything else is 2)
            return _refuse(args, f"--from-sweep {args.from_sweep}: internal error ({type(e).__name__}: {e}); please report it")
        sweep = {k: trial.get(k) for k in ("id", "setting", "method", "seed", "values", "selected_by",
                                           "results_file", "checkpoint")}
        sweep["dir"] = str(args.from_sweep)
        if is_main_process():  # once under a launcher
            print(f"unlearn ci: sweep {args.from_sweep}: trial {trial['id']} ({trial['method']}, seed "
                  f"{trial['seed']}, selected by {trial['selected_by'] or 'its only setting'})")
        if args.evaluate:
            args.model = trial["checkpoint"]
        else:
            args.from_results = trial["results_dir"]
    elif args.evaluate:
        return _refuse(args, "--evaluate evaluates the checkpoint of --from-sweep's trial; give --from-sweep DIR")
    if args.model and args.from_results and not args.update_card:
        return _refuse(args, "--model is not evaluated with --from-results (the results are only checked); drop --model, "
                     "or add --update-card to write the results into --model's card")
    if not args.model and not args.from_results:
        return _refuse(args, "give --model HUB_ID_OR_DIR to evaluate, or --from-results DIR to check existing lm-eval results")
    return runner.run_ci(CiOptions(suite=args.suite, out=args.out, model=args.model, revision=args.revision,
                            from_results=args.from_results, no_cache=args.no_cache, cache_dir=args.cache_dir,
                            update_card=args.update_card, limit=args.limit, model_args=model_args, sweep=sweep))


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "ci", help="Evaluate a checkpoint on a suite of tasks and checks; exit 0 pass, 1 a check failed, 2 error.",
        description="Run the suite's lm-eval tasks on a model (or read --from-results), evaluate the suite's checks "
        "(e.g. 'tofu_forget10/forget_quality >= 0.05', 'tofu_forget10/model_utility >= 0.95 * baseline') and write "
        "OUT/results.json (metrics, checks, provenance), OUT/summary.md (also appended to $GITHUB_STEP_SUMMARY) and "
        "OUT/junit.xml (one test case per check). Results are cached by model revision, task versions, options and "
        "data fingerprint. Exit status: 0 all checks pass, 1 a check fails, 2 an error.",
        epilog="Checks: LEFT OP RIGHT, OP one of >= <= > < == !=; each side is arithmetic (+ - * /, parentheses, "
        "abs(...)) over numbers, TASK/METRIC (this run) and baseline (the same metric in the suite's baseline run). "
        "Example: unlearn ci --model checkpoints/npo --suite unlearn-suite.yaml --out ci-out && "
        "unlearn report ci-out --html ci-out/report.html")
    p.add_argument("--suite", required=True, help="Suite YAML: tasks, checks, model_args, backend, metadata, "
                   "reference, baseline, limit (see docs/ci.md).")
    p.add_argument("--out", required=True, help="Output folder for results.json, summary.md, junit.xml, lm_eval/.")
    p.add_argument("--model", help="Hub id or local folder of the checkpoint (a LoRA adapter folder loads its base model).")
    p.add_argument("--revision", help="Hub commit sha (or branch/tag) of --model; pins the cache key.")
    p.add_argument("--model-args", dest="model_args", help="JSON object of extra lm-eval model arguments "
                   "(override the suite's model_args).")
    p.add_argument("--from-results", dest="from_results", metavar="DIR",
                   help="Check existing lm-eval output (folder or results_*.json) or an open-unlearning evaluation "
                   "folder (TOFU_EVAL.json / MUSE_EVAL.json; its Forget Quality and PrivLeak recomputed against the "
                   "suite's reference) instead of running a model.")
    p.add_argument("--from-sweep", dest="from_sweep", metavar="DIR",
                   help="Gate the selected trial of the `unlearn sweep` in DIR (its leaderboard's best row, the seed "
                   "with the best select score): check its results, or with --evaluate evaluate its checkpoint.")
    p.add_argument("--method", help="With --from-sweep: the selected trial of this method instead of the best row.")
    p.add_argument("--evaluate", action="store_true",
                   help="With --from-sweep: evaluate the trial's checkpoint on the suite (instead of checking its "
                   "results), e.g. on tasks the sweep did not run.")
    p.add_argument("--limit", type=positive_int, help="Documents per task (smoke tests; overrides the suite's limit).")
    p.add_argument("--no-cache", dest="no_cache", action="store_true", help="Evaluate even if cached results exist.")
    p.add_argument("--cache-dir", dest="cache_dir", help="Cache folder (default $UNLEARN_CACHE_DIR or "
                   "~/.cache/lm-eval-unlearning/ci).")
    p.add_argument("--update-card", dest="update_card", action="store_true",
                   help="Write the results as model-index evaluation results into --model's model card "
                   "(README.md of a folder, or the Hub repo's card).")
    p.set_defaults(func=_cmd_ci)
    output_guard.declare(p, outputs=["out"], inputs=["suite", "model"], scanned={"from_results": output_guard.RUN_FILES,
                                                                         "from_sweep": ("*.json", "*.jsonl", "trials", "spec.yaml")},
                         folders=["out"], contents={"out": ("results.json", "summary.md", "junit.xml",
                                                           "lm_eval/results_*.json")})
