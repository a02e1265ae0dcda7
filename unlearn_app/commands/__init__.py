"""The ``unlearn`` subcommands: one module per command (or family of subcommands), each exposing
``add_parsers(subparsers)`` and optionally ``ORDER`` (its position in ``unlearn --help``). :mod:`unlearn_app.cli`
finds them by iterating this package; modules whose name starts with ``_`` hold shared code, not commands. Keep
imports of heavy packages (torch, transformers, lm_eval) inside the command functions: ``unlearn --help`` imports
every command module. This module holds what the commands share."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


class InputError(ValueError):
    """Bad command-line input; the message says what to fix."""


def model_problem(model: str, flag: str = "--model") -> str | None:
    """Why ``model`` is neither a local folder nor a Hub id, or None: checked before torch and transformers are
    imported (a mistyped folder is refused in a second, not after loading the training stack)."""
    from unlearn_tasks.dataset_loader import HUB_ID

    path = Path(model).expanduser()
    if path.is_file():
        return (f"{flag} {model} is a file; give the model's folder (its config.json and weights), a LoRA adapter "
                "folder or a Hub id (ORG/NAME)")
    if path.exists() or HUB_ID.fullmatch(model):
        return None
    return f"{flag} {model} is neither a local folder nor a Hub id (ORG/NAME)"


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
