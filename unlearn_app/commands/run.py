"""``unlearn run``: train an unlearning method on a forget split and write the checkpoint."""

from __future__ import annotations

import argparse

from unlearn_app import output_guard
from unlearn_app.argtypes import non_negative_float, non_negative_int, positive_float, positive_int
from unlearn_app.commands import error

ORDER = 20


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


def add_parsers(sub) -> None:
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
    p.add_argument("--evaldu-target", dest="evaldu_target", type=non_negative_int,
                   help="With --data evaldu: the relationship fact id to unlearn (e.g. 272).")
    p.add_argument("--minimal-set", dest="minimal_set", action="store_true",
                   help="With --data evaldu: unlearn a whole minimal deep-unlearning set of the target (white-box).")
    p.add_argument("--retain", help="Retain split (default: retain90 for forget10, etc.; MUSE: retain1).")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--lora", dest="lora", action="store_true", default=None, help="Train LoRA adapters (default).")
    g.add_argument("--full", dest="lora", action="store_false", help="Full fine-tuning of all weights.")
    p.add_argument("--merge", action="store_true", help="Save LoRA runs as merged full weights instead of an adapter.")
    p.add_argument("--lora-r", dest="lora_r", type=positive_int, help="LoRA rank (default 8).")
    p.add_argument("--l1-lora", dest="l1_lora", type=non_negative_float, help="L1 penalty weight on LoRA weights (CLEAR's regulariser; default 0).")
    p.add_argument("--epochs", type=positive_float, help="Training epochs over the forget set (default 5).")
    p.add_argument("--lr", type=positive_float, help="Learning rate (default 1e-4).")
    p.add_argument("--batch-size", dest="batch_size", type=positive_int, help="Per-device batch size (default 8).")
    p.add_argument("--grad-accum", dest="grad_accum", type=positive_int, help="Gradient accumulation steps (default 1).")
    p.add_argument("--max-length", dest="max_length", type=positive_int, help="Max tokens per QA pair or raw-text chunk (default 256; MUSE used 2048).")
    p.add_argument("--seed", type=non_negative_int, help="Seed for data pairing and training (default 0).")
    p.add_argument("--dtype", help="float32 (default), bfloat16, float16 or auto.")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", help="Method hyperparameter, e.g. --param beta=0.2 (repeatable); read as the "
                   "parameter's declared type and checked against its range before training. `unlearn methods` lists "
                   "each method's parameters.")
    p.add_argument("--idk-file", dest="idk_file", help="Refusal answers, one per line (default: the built-in list).")
    p.add_argument("--save-steps", dest="save_steps", type=positive_int, help="Checkpoint every N steps (default: every epoch).")
    p.add_argument("--resume", action="store_true", help="Resume from the last checkpoint in OUT/checkpoints (only when "
                   "OUT/unlearn_config.yaml matches this run's method, data and hyperparameters).")
    p.add_argument("--overwrite", action="store_true", help="Allow writing into a non-empty OUT (its files are replaced). "
                   "OUT may never be the --model folder or inside it.")
    p.add_argument("--eval-tasks", dest="eval_tasks", help="Comma-separated lm-eval tasks to run on the result (e.g. tofu_forget10).")
    p.add_argument("--eval-every", dest="eval_every", type=positive_int, metavar="STEPS",
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
    p.add_argument("--eval-limit", dest="eval_limit", type=positive_int, metavar="N",
                   help="Documents per task in every evaluation of the run (smoke tests; default all).")
    p.add_argument("--eval-metadata", dest="eval_metadata", metavar="JSON",
                   help="Task options for the evaluations, as lm_eval --metadata, e.g. '{\"reference\": \"ref/\"}' "
                   "(Forget Quality and PrivLeak need a reference run).")
    p.add_argument("--push-to-hub", dest="push_to_hub", metavar="REPO", help="Upload the checkpoint to this Hub repo (private).")
    p.add_argument("--public", action="store_true", help="Make a newly created Hub repo public.")
    p.add_argument("--quiet", action="store_true", help="Hide progress bars.")
    p.set_defaults(func=_cmd_run)
    # an existing OUT has unlearn run's own rule (--overwrite / --resume), checked by the pipeline
    output_guard.declare(p, outputs=["out"], inputs=["model", "data_dir", "idk_file", "config"], folders=["out"],
                         existing_needs_overwrite=False)
