"""``unlearn sweep SPEC --out DIR``: methods x hyperparameters x seeds as one resumable experiment, ending in a
leaderboard (docs/sweep.md)."""

from __future__ import annotations

import argparse

from unlearn_app import output_guard
from unlearn_app.commands import error

ORDER = 25


def _cmd_sweep(args: argparse.Namespace) -> int:
    from unlearn_app.sweep import validate
    from unlearn_app.sweep.engine import (
        SweepError,
        check_folder,
        check_free,
        check_layout,
        hold,
        read_records,
        run_sweep,
    )
    from unlearn_app.sweep.spec import SpecError, load_spec

    if args.address and args.engine != "ray":
        return error("--address is the address of a Ray cluster; give it with --engine ray")
    try:
        # the folder's checks that need no spec first: the spec imports the methods (torch) to expand its trials
        check_free(args.out)  # a folder another sweep holds
        check_layout(args.spec, args.out, args.resume, existing=args.leaderboard_only)
        spec = load_spec(args.spec)
        output_guard.check(args, inputs=spec_inputs(spec))  # --out inside a model or data folder the spec names
        check_folder(spec, args.out, args.resume, existing=args.leaderboard_only)
        if not args.leaderboard_only:
            validate.validate_spec(spec)
        from unlearn_app.sweep.leaderboard import write_leaderboard

        with hold(args.out):
            if not args.leaderboard_only:
                run_sweep(spec, args.out, engine=args.engine, address=args.address, resume=args.resume,
                          retry_failed=args.retry_failed)
            paths = write_leaderboard(spec, args.out)
            records = read_records(args.out)
    except (SpecError, SweepError, output_guard.OutputClash) as e:
        return error(str(e))
    except KeyboardInterrupt:
        print(f"\nunlearn sweep: interrupted; the finished trials are in {args.out}/trials.jsonl. "
              f"Continue with: unlearn sweep {args.spec} --out {args.out} --resume")
        return 130
    print("unlearn sweep: " + ", ".join(str(p) for p in paths))
    failed = [t.id for t in spec.trials if records.get(t.id, {}).get("status") == "failed"]
    if failed:
        shown = ", ".join(failed[:5]) + (" ..." if len(failed) > 5 else "")
        print(f"unlearn sweep: {len(failed)} of {len(spec.trials)} trials failed ({shown}); their errors are in "
              f"{args.out}/trials/<id>/error.txt. Rerun them with: unlearn sweep {args.spec} --out {args.out} "
              "--resume --retry-failed")
        return 1
    return 0


def spec_inputs(spec) -> list[tuple[str, str]]:
    """(what, path) of every local input the spec names: the models, the data, the reference and baseline runs,
    the oracle model, the relearning data. A sweep's --out may not be one, lie inside one or hold one."""
    named = [("model", t.model) for t in spec.trials if not t.oracle]
    named += [("data_dir", spec.data.get("data_dir"))]
    ev = spec.evaluation
    named += [("evaluation.metadata.data_dir", ev.metadata.get("data_dir")), ("evaluation.baseline", ev.baseline)]
    refs = ev.reference.items() if isinstance(ev.reference, dict) else [("", ev.reference)]
    named += [(f"evaluation.reference{'.' + k if k else ''}", v) for k, v in refs]
    named += [("klom.oracle.model", spec.klom.get("oracle_model"))]
    named += [("attacks.relearn.relearn_data", (spec.attacks.get("relearn") or {}).get("relearn_data"))]
    seen: dict[str, str] = {}
    for what, path in named:
        if isinstance(path, str) and path and path not in seen:
            seen[path] = what
    return [(f"{what} of {spec.path}", path) for path, what in seen.items()]


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "sweep", help="Run methods x hyperparameters x seeds (`unlearn run` + evaluation each) and write a leaderboard.",
        description="Expand the sweep spec (YAML: models, data, forget splits, methods with a grid or random search "
        "over their parameters, seeds, evaluation tasks and checks) into trials; run each as `unlearn run` + lm-eval "
        "in DIR/trials/<id>/, append its result to DIR/trials.jsonl as it ends (a failed trial is recorded and the "
        "sweep goes on), then write DIR/leaderboard.md, .json, .html and .png. Spec errors stop it before any trial "
        "runs. Exit status: 0 every trial ok, 1 a trial failed (the last line names them), 2 bad input, 130 Ctrl-C "
        "(continue with --resume). See docs/sweep.md.")
    p.add_argument("spec", help="The sweep spec (YAML).")
    p.add_argument("--out", required=True, help="Output folder (empty, or a sweep to continue with --resume).")
    p.add_argument("--resume", action="store_true", help="Continue the sweep in --out: skip the trials with a "
                   "record in trials.jsonl, rerun the unfinished ones; checks, selection and the leaderboard follow "
                   "the spec as it is now.")
    p.add_argument("--retry-failed", dest="retry_failed", action="store_true",
                   help="With --resume: also rerun the trials recorded as failed.")
    p.add_argument("--engine", choices=["local", "ray"], default="local",
                   help="local: one trial at a time on this machine; ray: trials as Ray tasks (pip install ray), or as Ray "
                   "Tune trials stopped early when the spec has early_stop.")
    p.add_argument("--address", help="With --engine ray: the Ray cluster (e.g. auto, ray://head:10001); default: a "
                   "local Ray instance.")
    p.add_argument("--leaderboard-only", dest="leaderboard_only", action="store_true",
                   help="Run nothing: rewrite the leaderboard of the sweep in --out from its trials.jsonl.")
    p.set_defaults(func=_cmd_sweep)
    # --out is never the spec (or inside/holding it), nor an input the spec names (checked once it is read); an
    # existing sweep folder is continued with --resume, which check_folder checks (a non-empty --out without
    # --resume is refused there)
    output_guard.declare(p, outputs=["out"], inputs=["spec"], folders=["out"], existing_needs_overwrite=False)
