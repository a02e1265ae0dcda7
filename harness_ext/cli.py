"""The ``unlearn`` command line: ``unlearn --help`` lists the subcommands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness_ext import tasks_dir


def _cmd_tasks_dir(args: argparse.Namespace) -> int:
    print(tasks_dir())
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from harness_ext.demo import DemoConfig, run_demo

    run_demo(DemoConfig(workdir=Path(args.workdir), forget_split=args.forget, epochs=args.epochs, lr=args.lr,
                        seed=args.seed, backend=args.backend, quiet=args.quiet))
    return 0


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
    p.add_argument("--workdir", default="unlearn_demo", help="Folder for data, models, lm-eval outputs, "
                   "results.json and report.md (default: ./unlearn_demo).")
    p.add_argument("--forget", default="forget10", choices=["forget01", "forget05", "forget10"],
                   help="Forget split to evaluate (default: forget10).")
    p.add_argument("--epochs", type=float, default=40, help="Fine-tuning epochs for target and retain (default: 40).")
    p.add_argument("--lr", type=float, default=3e-3, help="Fine-tuning learning rate (default: 3e-3).")
    p.add_argument("--seed", type=int, default=0, help="Seed for corpus, model init and training (default: 0).")
    p.add_argument("--backend", default="hf", choices=["hf", "vllm"], help="lm-eval backend (default: hf).")
    p.add_argument("--quiet", action="store_true", help="Hide the training progress bars.")
    p.set_defaults(func=_cmd_demo)

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
