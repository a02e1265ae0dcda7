"""The ``unlearn`` command line: ``unlearn --help`` lists the subcommands.

Every subcommand lives in a module of :mod:`unlearn_app.commands` that exposes ``add_parsers(subparsers)``; this
module finds them (no list to edit), so adding a command means adding a module."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from types import ModuleType

from unlearn_app import commands, output_guard


def command_modules() -> list[ModuleType]:
    """The command modules of :mod:`unlearn_app.commands` (names without a leading underscore), in the order of their
    ``ORDER`` (position in ``unlearn --help``; default last), then by name."""
    modules = [importlib.import_module(f"{commands.__name__}.{info.name}")
               for info in pkgutil.iter_modules(commands.__path__) if not info.name.startswith("_")]
    return sorted(modules, key=lambda m: (getattr(m, "ORDER", 1000), m.__name__))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unlearn",
        description="lm-eval-unlearning: LLM unlearning benchmarks as lm-evaluation-harness tasks. "
        "Evaluate any model with `lm_eval --model hf --model_args pretrained=DIR --tasks tofu_forget10`; "
        "this command holds the tools around it.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in command_modules():
        module.add_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        output_guard.check(args)  # no output may destroy an input or an existing result (before any work)
    except output_guard.OutputClash as e:
        return commands.error(str(e))
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
