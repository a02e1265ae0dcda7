"""``unlearn sweep SPEC --out DIR``: methods x hyperparameters x seeds as one resumable experiment, ending in a
leaderboard (docs/sweep.md)."""

from __future__ import annotations

import argparse

from unlearn_app import output_guard
from unlearn_app.commands import error

ORDER = 25


def _cmd_sweep(args: argparse.Namespace) -> int:
    from unlearn_app.sweep.engine import SweepError, run_sweep
    from unlearn_app.sweep.spec import SpecError, load_spec

    if args.address and args.engine != "ray":
        return error("--address is the address of a Ray cluster; give it with --engine ray")
    try:
        spec = load_spec(args.spec)
        if not args.leaderboard_only:
            _check_tasks(spec)
            run_sweep(spec, args.out, engine=args.engine, address=args.address, resume=args.resume,
                      retry_failed=args.retry_failed)
    except (SpecError, SweepError) as e:
        return error(str(e))
    except KeyboardInterrupt:
        print(f"\nunlearn sweep: interrupted; the finished trials are in {args.out}/trials.jsonl. "
              f"Continue with: unlearn sweep {args.spec} --out {args.out} --resume")
        return 130
    from unlearn_app.sweep.leaderboard import write_leaderboard

    paths = write_leaderboard(spec, args.out)
    print("unlearn sweep: " + ", ".join(str(p) for p in paths))
    return 0


def _check_tasks(spec) -> None:
    """The evaluation's tasks are tasks lm-eval knows (before any trial starts)."""
    if not spec.evaluation.tasks:
        return
    from harness_ext.evaluate import unknown_tasks

    unknown = unknown_tasks(list(spec.evaluation.tasks))
    if unknown:
        from unlearn_tasks.settings import parse_settings

        raise parse_settings(spec.text, spec.path).error(
            "evaluation.tasks", f"unknown task(s) {', '.join(unknown)}; `lm-eval ls tasks` lists them")


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "sweep", help="Run methods x hyperparameters x seeds (`unlearn run` + evaluation each) and write a leaderboard.",
        description="Expand the sweep spec (YAML: models, data, forget splits, methods with a grid or random search "
        "over their parameters, seeds, evaluation tasks and checks) into trials; run each as `unlearn run` + lm-eval "
        "in DIR/trials/<id>/, append its result to DIR/trials.jsonl as it ends (a failed trial is recorded and the "
        "sweep goes on), then write DIR/leaderboard.md, .json, .html and .png. Spec errors stop it before any trial "
        "runs. See docs/sweep.md.")
    p.add_argument("spec", help="The sweep spec (YAML).")
    p.add_argument("--out", required=True, help="Output folder (empty, or a sweep to continue with --resume).")
    p.add_argument("--resume", action="store_true", help="Continue the sweep in --out: skip the trials with a "
                   "record in trials.jsonl, rerun the unfinished ones.")
    p.add_argument("--retry-failed", dest="retry_failed", action="store_true",
                   help="With --resume: also rerun the trials recorded as failed.")
    p.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="local: one trial at a time on this machine; ray: trials as Ray tasks (pip install ray), or as Ray "
                   "Tune trials stopped early when the spec has early_stop.")
    p.add_argument("--address", help="With --engine ray: the Ray cluster (e.g. auto, ray://head:10001); default: a "
                   "local Ray instance.")
    p.add_argument("--leaderboard-only", dest="leaderboard_only", action="store_true",
                   help="Run nothing: rewrite the leaderboard from DIR/trials.jsonl.")
    p.set_defaults(func=_cmd_sweep)
    # --out is never the spec (or inside/holding it); an existing sweep folder is continued with --resume, which
    # run_sweep checks itself (a non-empty --out without --resume is refused there)
    output_guard.declare(p, outputs=["out"], inputs=["spec"], folders=["out"], existing_needs_overwrite=False)
