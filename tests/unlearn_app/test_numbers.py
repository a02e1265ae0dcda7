"""The one number formatter of the tables (unlearn report, ci summary, leaderboard, model card, attack recovery,
waterdrum report): values written by hand."""

import math

import numpy as np
import pytest

from unlearn_app.reports.numbers import MISSING, format_number


@pytest.mark.parametrize(("value", "text"), [
    (None, MISSING), (math.nan, MISSING), (np.float32("nan"), MISSING),
    (0.5, "0.5000"), (-0.25, "-0.2500"), (0.0, "0.0000"), (0.001, "0.0010"), (9999.5, "9999.5000"),
    (1.2345e-7, "1.23e-07"), (-0.000999, "-9.99e-04"), (12345.6, "1.23e+04"), (math.inf, "inf"),
    (3, "3"), (np.int64(4), "4"), (True, "True"), (np.float32(0.5), "0.5000"), ("grad_diff", "grad_diff"),
])
def test_format_number(value, text):
    assert format_number(value) == text

