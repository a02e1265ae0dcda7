"""Numeric command-line options checked at parse time against their declared range: argparse ``type=`` functions.

A value out of range stops the command before any work with argparse's usual one-line error (exit 2) naming the
option, e.g. ``argument --chunk-size: must be an integer >= 1, got 0``; no option reaches the numeric code with a
value that would silently change the result. :func:`checked` is the one way such a type parses and refuses (the
numeric flags of ``unlearn run`` use it with their ``RunConfig`` field's declared range).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import TypeVar

from unlearn_methods.params import MAX_SEED

T = TypeVar("T")


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


def checked(convert: Callable[[str], T], accept: Callable[[T], bool], not_converted: str, refused: str,
            name: str) -> Callable[[str], T]:
    """An argparse type: ``convert(text)``, stopping with ``{not_converted}, got 'text'`` when that fails and with
    ``{refused}, got text`` when ``accept`` refuses the value. ``name`` is how argparse names the type."""

    def parse(text: str) -> T:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{not_converted}, got {text!r}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"{refused}, got {text}")
        return value

    parse.__name__ = name  # argparse names the type in its own messages
    return parse


def int_range(low: int | None = None, high: int | None = None) -> Callable[[str], int]:
    """An integer in ``[low, high]`` (either end may be open-ended with None)."""
    what = _describe("an integer", low, high, False)
    return checked(int, lambda v: (low is None or v >= low) and (high is None or v <= high), what, what, "integer")


def float_range(low: float | None = None, high: float | None = None, low_open: bool = False) -> Callable[[str], float]:
    """A finite number in ``[low, high]`` (``(low, high]`` with ``low_open``)."""

    def accept(value: float) -> bool:
        below = low is not None and (value <= low if low_open else value < low)
        return math.isfinite(value) and not below and (high is None or value <= high)

    what = _describe("a finite number", low, high, low_open)
    return checked(float, accept, what, what, "number")


#: The common cases.
positive_int = int_range(1)
non_negative_int = int_range(0)
positive_float = float_range(0.0, low_open=True)
non_negative_float = float_range(0.0)
#: A seed every seeded library accepts (numpy's are < 2**32): every ``--seed`` option.
seed_int = int_range(0, MAX_SEED)
