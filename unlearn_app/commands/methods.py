"""``unlearn methods``: list the unlearning methods and their hyperparameters."""

from __future__ import annotations

import argparse

ORDER = 40


def _cmd_methods(args: argparse.Namespace) -> int:
    from unlearn_methods import describe_methods

    print(describe_methods())
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("methods", help="List the unlearning methods and their hyperparameters.",
                       description="List the methods of `unlearn run --method`: for each, what its loss does, its "
                       "paper, its limits, the forget data it takes, and its hyperparameters with their types and "
                       "defaults (set one with `unlearn run --param KEY=VALUE`). The same table: docs/methods.md.")
    p.set_defaults(func=_cmd_methods)
