"""Every comparison of a CI check at its boundary: the value equal to the bound, just above it and just below it,
against a truth table written out by hand (a ``<=`` read as ``<``, or ``>=`` as ``>``, fails at equality), for a
plain bound and for one relative to the baseline run."""

import pytest

from unlearn_app.ci.checks import COMPARISONS, evaluate, lookup_in, parse_check

#: operator -> whether it holds for (value == bound, value > bound, value < bound)
TRUTH = {
    ">=": (True, True, False),
    "<=": (True, False, True),
    ">": (False, True, False),
    "<": (False, False, True),
    "==": (True, False, False),
    "!=": (False, True, True),
}
# 0.25 = 0.5 * 0.5 exactly in binary floating point, so "equal" is exact equality; 1e-9 is the smallest step tried
CASES = {"equal": 0.25, "above": 0.25 + 1e-9, "below": 0.25 - 1e-9}


def test_the_table_covers_every_operator():
    assert set(TRUTH) == set(COMPARISONS)


@pytest.mark.parametrize("op", sorted(TRUTH))
@pytest.mark.parametrize("case", list(CASES))
def test_a_plain_bound(op, case):
    outcome = evaluate(parse_check(f"t/m {op} 0.25"), lookup_in({"t": {"m": CASES[case]}}))
    assert outcome.passed is TRUTH[op][list(CASES).index(case)]
    assert outcome.value == CASES[case] and outcome.bound == 0.25


@pytest.mark.parametrize("op", sorted(TRUTH))
@pytest.mark.parametrize("case", list(CASES))
def test_a_bound_relative_to_the_baseline(op, case):
    # bound = 0.5 * baseline (0.5) = 0.25, exactly
    outcome = evaluate(parse_check(f"t/m {op} 0.5 * baseline"), lookup_in({"t": {"m": CASES[case]}}),
                       lookup_in({"t": {"m": 0.5}}))
    assert outcome.passed is TRUTH[op][list(CASES).index(case)]
    assert outcome.bound == 0.25
