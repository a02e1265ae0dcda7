"""The ``unlearn`` subcommands: one module per command (or family of subcommands), each exposing
``add_parsers(subparsers)`` and optionally ``ORDER`` (its position in ``unlearn --help``). :mod:`unlearn_app.cli`
finds them by iterating this package; modules whose name starts with ``_`` hold shared code, not commands. Keep
imports of heavy packages (torch, transformers, lm_eval) inside the command functions: ``unlearn --help`` imports
every command module. This module holds what the commands share."""

from __future__ import annotations

import argparse
import sys


class InputError(ValueError):
    """Bad command-line input; the message says what to fix."""


def error(message: str) -> int:
    """Print ``error: message`` to stderr and return the exit code for bad input (2)."""
    print(f"error: {message}", file=sys.stderr)
    return 2


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows each option's default, except where there is none (no "(default: None)" noise)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.required or "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)
