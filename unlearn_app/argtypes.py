"""Numeric command-line options checked at parse time against their declared range: argparse ``type=`` functions.

A value out of range stops the command before any work with argparse's usual one-line error (exit 2) naming the
option, e.g. ``argument --chunk-size: must be an integer >= 1, got 0``; no option reaches the numeric code with a
value that would silently change the result.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from unlearn_methods.params import MAX_SEED


def _describe(kind: str, low: float | None, high: float | None, low_open: bool) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {_number(low)}")
    if high is not None:
        parts.append(f"<= {_number(high)}")
    return f"must be {kind} {' and '.join(parts)}".rstrip()


def _number(bound: float) -> str:
    """A bound as written: an integer in full (``4294967295``, not ``4.29497e+09``), a float short."""
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


def int_range(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """An integer in ``[low, high]`` (either end may be open-ended with None)."""

    def parse(text: str) -> int:
        what = _describe("an integer", low, high, False)
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what}, got {text!r}") from None
        if (low is not None and value < low) or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{what}, got {value}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its own messages
    return parse


def float_range(low: float | None = None, high: float | None = None, low_open: bool = False) -> Callable[[str], float]:
    """A finite number in ``[low, high]`` (``(low, high]`` with ``low_open``)."""

    def parse(text: str) -> float:
        what = _describe("a finite number", low, high, low_open)
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what}, got {text!r}") from None
        below = low is not None and (value <= low if low_open else value < low)
        if not math.isfinite(value) or below or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{what}, got {text}")
        return value

    parse.__name__ = "number"
    return parse


#: The common cases.
positive_int = int_range(1)
non_negative_int = int_range(0)
positive_float = float_range(0.0, low_open=True)
non_negative_float = float_range(0.0)
#: A seed every seeded library accepts (numpy's are < 2**32): every ``--seed`` option.
seed_int = int_range(0, MAX_SEED)
