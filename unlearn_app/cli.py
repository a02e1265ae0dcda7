"""The ``unlearn`` command line: ``unlearn --help`` lists the subcommands.

Every subcommand lives in a module of :mod:`unlearn_app.commands` that exposes ``add_parsers(subparsers)``; this
module finds them (no list to edit), so adding a command means adding a module. A command's module is named after
it (``-`` as ``_``) unless :data:`MODULE_OF` says otherwise: ``unlearn COMMAND ...`` then imports that module alone
(importing and building every command's parser cost about 0.15 s of CPU, more than some commands' own work)."""

from __future__ import annotations

import argparse
import functools
import importlib
import pkgutil
import sys
from types import ModuleType

from unlearn_app import commands, output_guard
from unlearn_app.launch import relaunch_cpu_processes

MODULE_OF = {"watermark": "waterdrum", "verify": "waterdrum"}
"""Commands added by a module not named after them (``tests/unlearn_app/test_command_modules.py`` checks all)."""


def command_modules() -> list[ModuleType]:
    """The command modules of :mod:`unlearn_app.commands` (names without a leading underscore), in the order of their
    ``ORDER`` (position in ``unlearn --help``; default last), then by name."""
    modules = [importlib.import_module(f"{commands.__name__}.{info.name}")
               for info in pkgutil.iter_modules(commands.__path__) if not info.name.startswith("_")]
    return sorted(modules, key=lambda m: (getattr(m, "ORDER", 1000), m.__name__))


def module_name(command: str) -> str:
    """The name of the module of :mod:`unlearn_app.commands` expected to add ``command``."""
    return MODULE_OF.get(command, command.replace("-", "_"))


def _module_of(command: str) -> ModuleType | None:
    name = module_name(command)
    if not name.isidentifier() or name.startswith("_"):
        return None
    full = f"{commands.__name__}.{name}"
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError as e:
        if e.name != full:  # the module is there but one of its imports is not
            raise
        return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``unlearn`` parser with every command; with ``command``, only the commands of its module (the same
    parser for that command, ``--help`` included), or every command where no module is named for it."""
    modules = None
    if command is not None:
        module = _module_of(command)
        modules = [module] if module is not None else None
    parser = _parser(modules if modules is not None else command_modules())
    if modules is not None and command not in _subparsers(parser).choices:
        parser = _parser(command_modules())
    return parser


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def _parser(modules: list[ModuleType]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unlearn",
        description="lm-eval-unlearning: LLM unlearning benchmarks as lm-evaluation-harness tasks. "
        "Evaluate any model with `lm_eval --model hf --model_args pretrained=DIR --tasks tofu_forget10`; "
        "this command holds the tools around it.",
    )
    parser.add_argument("--version", action=_Version, help="Print the versions of lm-eval-unlearning and lm-eval, "
                        "and exit.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in modules:
        module.add_parsers(sub)
    _describe(sub)
    return parser


def version_text() -> str:
    """``unlearn X (lm-eval Y)``: the installed versions (``not installed`` for a checkout on PYTHONPATH only)."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return f"unlearn {installed('lm-eval-unlearning')} (lm-eval {installed('lm-eval')})"


class _Version(argparse.Action):
    """``--version``: the versions, read when asked (not on every start)."""

    def __init__(self, option_strings, dest, help=None):  # noqa: A002 - argparse's keyword
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_text())
        parser.exit()


def _describe(sub: argparse._SubParsersAction, prefix: str = "") -> None:
    """Give every subcommand (nested ones too) a description, its one-line help where it has none, and its example
    commands (:data:`unlearn_app.commands._examples.EXAMPLES`) at the end of its ``--help``."""
    from unlearn_app.commands._examples import EXAMPLES

    helps = {action.dest: action.help for action in sub._choices_actions}
    for name, parser in sub.choices.items():
        command = f"{prefix}{name}"
        if not parser.description and helps.get(name):
            parser.description = helps[name]
        examples = EXAMPLES.get(command, ())
        if examples:
            block = "examples:\n" + "\n".join(f"  {line}" for line in examples)
            parser.epilog = f"{parser.epilog}\n\n{block}" if parser.epilog else block
            parser.formatter_class = _keeping_examples(parser.formatter_class)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                _describe(action, f"{command} ")


@functools.cache
def _keeping_examples(formatter: type[argparse.HelpFormatter]) -> type[argparse.HelpFormatter]:
    """``formatter`` that prints the ``examples:`` block of an epilog line by line (argparse joins lines)."""

    class KeepingExamples(formatter):  # type: ignore[misc, valid-type]
        def _fill_text(self, text: str, width: int, indent: str) -> str:
            head, marker, block = text.partition("examples:\n")
            if not marker:
                return super()._fill_text(text, width, indent)
            filled = super()._fill_text(head, width, indent) + "\n\n" if head.strip() else ""
            return filled + indent + marker + "".join(indent + line + "\n" for line in block.splitlines())

    return KeepingExamples


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv and not argv[0].startswith("-") else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        output_guard.check(args)  # no output may destroy an input or an existing result (before any work)
    except output_guard.OutputClash as e:
        return commands.error(str(e))
    # `accelerate launch --cpu --num_processes N` started one process: the command's options checked, start the N
    launch_problem = getattr(args, "launch_problem", None)
    if problem := relaunch_cpu_processes(argv, launch_problem and (lambda: launch_problem(args))):
        return commands.error(problem)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
