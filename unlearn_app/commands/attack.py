"""``unlearn attack quantize|relearn|report``: does the forgetting last? Quantization and relearning attacks on an
unlearned checkpoint, and a recovery report over lm-eval results."""

from __future__ import annotations

import argparse
import json

from unlearn_app import output_guard
from unlearn_app.argtypes import float_range, positive_float, positive_int, seed_int
from unlearn_app.commands import DefaultsHelpFormatter, error, model_problem

ORDER = 100
#: What lm-eval output folders are read for.
RESULTS = "results*.json"
#: File name of `attack report --out DIR/` (the report goes inside the folder).
REPORT_NAME = "attack_report"


def _cmd_quantize(args: argparse.Namespace) -> int:
    if model_problem(args.model):
        return error(model_problem(args.model))
    from unlearn_methods.attacks.quantize import quantize_checkpoint

    try:
        report = quantize_checkpoint(args.model, args.out, bits=args.bits, group_size=args.group_size)
    except (ValueError, OSError) as e:
        return error(str(e))
    print(f"Quantized {report.layers} linear layers ({report.parameters:,} weights) to int{report.bits}, "
          f"max |change| {report.max_abs_error:.3g}; dequantized checkpoint written to {args.out}")
    return 0


def _cmd_relearn(args: argparse.Namespace) -> int:
    if model_problem(args.model):
        return error(model_problem(args.model))
    from unlearn_methods.attacks.relearn import relearn

    try:
        r = relearn(args.model, args.out, data=args.data, forget=args.forget, data_dir=args.data_dir,
                    relearn_fraction=getattr(args, "relearn_fraction", None), relearn_data=args.relearn_data, steps=args.steps,
                    lr=args.lr, batch_size=args.batch_size, seed=args.seed, progress=not args.quiet,
                    blur_references=args.blur_references)
    except (ValueError, OSError) as e:
        return error(str(e))
    if r.relearn_data is not None:
        c = r.relearn_data
        print(f"Relearned on {c['rows']} {'question-answer' if c['kind'] == 'qa' else 'text'} rows of {c['path']}. "
              f"Forget probability, {r.measured} ({len(r.held_out)} items): {r.held_out_prob_before:.4f} -> "
              f"{r.held_out_prob_after:.4f}.")
    else:
        print(f"Held-out forget probability ({len(r.held_out)} items never shown): {r.held_out_prob_before:.4f} -> "
              f"{r.held_out_prob_after:.4f}; shown ({len(r.shown)} items): {r.shown_prob_before:.4f} -> "
              f"{r.shown_prob_after:.4f}.")
    print(f"Checkpoint, relearn_split.json and relearn.json in {args.out}")
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from harness_ext.results import json_safe
    from unlearn_app.reports.attack_recovery import flat_metrics, recovery_rows, to_json, to_markdown

    attacked = {}
    for item in args.attacked:
        if "=" not in item:
            return error(f"--attacked expects NAME=PATH (e.g. int4=evals/int4), got {item!r}")
        name, path = item.split("=", 1)
        if name in attacked:  # one row per name: a repeated name would silently drop a row
            return error(f"--attacked names {name!r} twice ({attacked[name]} and {path}); give each attack its own name")
        attacked[name] = path
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    try:
        rows = recovery_rows(flat_metrics(args.unlearned), {n: flat_metrics(p) for n, p in attacked.items()}, metrics,
                             flat_metrics(args.target) if args.target else None,
                             flat_metrics(args.retain) if args.retain else None)
    except (ValueError, FileNotFoundError) as e:
        return error(str(e))
    out = output_guard.prefix_base(args.out, REPORT_NAME)
    out.parent.mkdir(parents=True, exist_ok=True)
    md = to_markdown(rows)
    output_guard.write_text(out.with_suffix(".md"), md)
    output_guard.write_text(out.with_suffix(".json"), json.dumps(json_safe(to_json(rows)), indent=2) + "\n")
    from unlearn_app.reports.plots import recovery_dots

    with output_guard.atomic_path(out.with_suffix(".png")) as png:
        recovery_dots(rows, png)
    print(md)
    print(f"Written {out.with_suffix('.md')}, {out.with_suffix('.json')} and {out.with_suffix('.png')} (per metric: "
          "retain, unlearned, attacked and target values, recovery written beside the attacked point)")
    return 0


def add_parsers(sub) -> None:
    attack = sub.add_parser("attack", help="Does the forgetting last? Quantization / relearning attacks and a "
                            "recovery report.",
                            description="Attack an unlearned checkpoint and measure how much of the forgotten "
                            "knowledge comes back. Evaluate the attacked checkpoints with lm_eval like any model, "
                            "then compare with `unlearn attack report`.")
    asub = attack.add_subparsers(dest="attack_command", required=True)

    p = asub.add_parser("quantize", help="Quantize linear weights to int8/int4 (torchao), write the dequantized "
                        "checkpoint.", formatter_class=DefaultsHelpFormatter,
                        description="Symmetric per-group round-to-nearest quantization of every linear layer but the "
                        "output head (torchao's affine quantization), as in Zhang et al. (ICLR 2025). The checkpoint "
                        "holds the dequantized weights: the same numbers as the quantized model, loadable by "
                        "`lm_eval --model hf` on CPU or GPU without torchao. quantization.json records the error.")
    p.add_argument("--model", required=True, help="Unlearned checkpoint folder.")
    p.add_argument("--bits", type=int, choices=(8, 4), required=True)
    p.add_argument("--group-size", dest="group_size", type=positive_int,
                   help="Input columns per scale (default: whole rows for int8; 128, or whole rows if 128 does not "
                   "divide them, for int4).")
    p.add_argument("--out", required=True, help="Folder for the quantized checkpoint.")
    p.set_defaults(func=_cmd_quantize)
    output_guard.declare(p, outputs=["out"], inputs=["model"], folders=["out"])

    p = asub.add_parser("relearn", help="Fine-tune on part of the forget set; measure the held-out part.",
                        formatter_class=DefaultsHelpFormatter,
                        description="Targeted relearning (Hu et al., 2024): a seeded --relearn-fraction of the "
                        "forget split is shown to the model for --steps fine-tuning steps (answer tokens only); the "
                        "held-out rest's forget probability (mean length-normalised answer probability) is measured "
                        "before and after. With --relearn-data, a related corpus is shown instead of forget items and "
                        "the whole forget set is measured (or, with --relearn-fraction too, the same held-out part "
                        "the forget-set attack with that seed measures). Writes the checkpoint, relearn_split.json "
                        "(shown / measured items) and relearn.json (probabilities, what was measured, the corpus).")
    p.add_argument("--model", required=True, help="Unlearned checkpoint folder.")
    p.add_argument("--data", default="tofu", help="tofu (locuslab/TOFU), demo (embedded corpus), blur (BLUR's queries "
                   "answered by the base model: --forget rwku_forget, --blur-references) or a Hub id.")
    p.add_argument("--data-dir", dest="data_dir", help="Local folder of the dataset's JSON configs.")
    p.add_argument("--forget", default="forget10", help="Forget split (with --data blur: a query file such as "
                   "rwku_forget or whp_forget).")
    p.add_argument("--blur-references", dest="blur_references", metavar="PATH",
                   help="With --data blur: the base model's answers (`unlearn blur-references`), whose probability "
                   "is measured.")
    p.add_argument("--relearn-fraction", dest="relearn_fraction", type=float_range(0.0, 1.0, low_open=True), default=argparse.SUPPRESS,
                   help="Share of the forget split in the seeded split (default 0.5). Without --relearn-data that "
                   "share is shown to the model; with it, nothing of the forget set is shown and only the rest is "
                   "measured (default then: the whole forget set).")
    p.add_argument("--relearn-data", dest="relearn_data", metavar="PATH",
                   help="Related corpus to relearn on instead of forget items: a .jsonl/.json, .csv or .parquet file, "
                   "or a Hugging Face datasets folder (save_to_disk), with a 'text' column (every token trained) or "
                   "'question' and 'answer' columns (formatted like the forget set); or a BLUR relearning set by difficulty, "
                   "blur:SOURCE:LEVEL (e.g. blur:rwku:hi; levels hi, mid, lo; read from "
                   "$UNLEARN_DATA_DIR/forgelab/BLUR or the Hub).")
    p.add_argument("--steps", type=positive_int, default=20, help="Optimiser steps.")
    p.add_argument("--lr", type=positive_float, default=1e-5, help="Learning rate (cosine schedule, no warm-up).")
    p.add_argument("--batch-size", dest="batch_size", type=positive_int, default=4)
    p.add_argument("--seed", type=seed_int, default=0, help="Seeds the shown / held-out split and training.")
    p.add_argument("--out", required=True, help="Folder for the relearned checkpoint.")
    p.add_argument("--quiet", action="store_true", help="No progress bars.")
    p.set_defaults(func=_cmd_relearn)
    output_guard.declare(p, outputs=["out"], inputs=["model", "data_dir", "relearn_data", "blur_references"],
                         folders=["out"])

    p = asub.add_parser("report", help="Metrics before / after each attack, with target and retain references.",
                        description="Reads lm-eval results (output folders or results_*.json) of the unlearned "
                        "model, each attacked model, and optionally the target and retain models; per attack and "
                        "metric writes OUT.md and OUT.json with recovery = (after - unlearned) / (target - "
                        "unlearned): 0 = nothing came back, 1 = back to the target model; and OUT.png, one panel per "
                        "metric with the retain / unlearned / attacked / target values and the recovery.")
    p.add_argument("--unlearned", required=True, help="lm-eval results of the unlearned model (before attack).")
    p.add_argument("--attacked", required=True, action="append", metavar="NAME=PATH",
                   help="lm-eval results of an attacked model (repeat for several attacks).")
    p.add_argument("--target", help="lm-eval results of the target model (before unlearning).")
    p.add_argument("--retain", help="lm-eval results of the retain model (never trained on the forget set).")
    p.add_argument("--metrics", required=True, help="Comma-separated task/metric, e.g. tofu_forget10/forget_quality.")
    p.add_argument("--out", default="attack_report", help="Output path prefix (.md, .json and .png replace its "
                   "suffix; a folder or a path ending in / gets FOLDER/attack_report.*).")
    p.set_defaults(func=_cmd_report)
    output_guard.declare(p, outputs=["out"], prefixes={"out": (".md", ".json", ".png")},
                         folder_names={"out": REPORT_NAME},
                         scanned={d: (RESULTS,) for d in ("unlearned", "attacked", "target", "retain")})
