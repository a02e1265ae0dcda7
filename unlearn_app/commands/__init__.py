"""Subcommand families of ``unlearn``: one module per family, each with ``add_parsers(subparsers)``, listed in
:data:`unlearn_app.cli.EXTENSIONS`. This module holds what they share."""

from __future__ import annotations

import sys


class InputError(ValueError):
    """Bad command-line input; the message says what to fix."""


def error(message: str) -> int:
    """Print ``error: message`` to stderr and return the exit code for bad input (2)."""
    print(f"error: {message}", file=sys.stderr)
    return 2
