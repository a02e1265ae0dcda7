"""``unlearn methods``: list the unlearning methods and their hyperparameters."""

from __future__ import annotations

import argparse

ORDER = 40


def _cmd_methods(args: argparse.Namespace) -> int:
    from unlearn_methods import describe_methods

    print(describe_methods())
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("methods", help="List the unlearning methods and their hyperparameters.")
    p.set_defaults(func=_cmd_methods)
