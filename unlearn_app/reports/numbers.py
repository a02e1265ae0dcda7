"""How every table of the ``unlearn`` tools writes a number: one formatter, one marker for a missing value.

``unlearn report`` (Markdown and HTML), the ``unlearn ci`` summary, the sweep leaderboard, the model card, the attack
recovery report, ``unlearn waterdrum report`` and the demo report all write their numbers with :func:`format_number`,
so one value reads the same wherever it appears."""

from __future__ import annotations

import math
import numbers
from typing import Any

#: What a table shows where a value is missing (``None``) or undefined (NaN).
MISSING = "n/a"


def format_number(value: Any) -> str:
    """``value`` as the tables write it: :data:`MISSING` for ``None`` or NaN; integers (and booleans) as they are;
    other numbers with 4 decimals, or in scientific notation with 3 significant digits when they are not zero and
    below 0.001 or from 10,000 on in magnitude (a Forget Quality p-value of 1.2e-07 stays readable); anything else as
    ``str`` does."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if not isinstance(value, numbers.Real):
        return str(value)
    value = float(value)  # numpy scalars too
    if math.isnan(value):
        return MISSING
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e4):
        return f"{value:.2e}"
    return f"{value:.4f}"
