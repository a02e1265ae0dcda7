"""Edge cases of the membership-inference scores, by hand: the default k of Min-K% and Min-K%++, the variance floor
and a zero variance, and when AUROC is undefined. Written to kill the mutants that survived benchmarks/mutation.py
(docs/testing.md, Mutation score)."""

import math
import warnings

import pytest

from unlearn_tasks.metrics.mia import mia_auroc, min_k_plus_plus_score, min_k_score

LPS = [-1.0, -2.0, -3.0, -4.0, -5.0]


def test_min_k_default_is_the_lowest_40_percent():
    assert min_k_score(LPS) == pytest.approx(4.5)  # int(0.4 * 5) = 2 lowest: -5, -4
    assert min_k_score(LPS, k=1.0) == pytest.approx(3.0)


def test_min_k_plus_plus_defaults():
    mean, var = [-3.0] * 5, [0.25] * 5  # sigma 1/2: z = 2 * (lp + 3) = [4, 2, 0, -2, -4]
    assert min_k_plus_plus_score(LPS, mean, var) == pytest.approx(3.0)  # lowest 2: -4, -2
    assert min_k_plus_plus_score(LPS, mean, var, var_floor=1.0) == pytest.approx(1.5)  # sigma 1


def test_min_k_plus_plus_zero_variance_divides_by_1e_minus_12():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 0 / 0
        assert min_k_plus_plus_score([-1.0 - 1e-12], [-1.0], [0.0], k=1.0) == pytest.approx(1.0, rel=1e-3)
        assert min_k_plus_plus_score([-1.0], [-1.0], [0.0], k=1.0) == 0.0


@pytest.mark.parametrize(("forget", "holdout"), [
    ([], [1.0]), ([1.0], []), ([float("nan"), 1.0], [2.0]), ([1.0], [float("nan"), 2.0])])
def test_auroc_undefined(forget, holdout):
    assert math.isnan(mia_auroc(forget, holdout))


def test_auroc_of_one_score_each():
    assert mia_auroc([1.0], [2.0]) == 1.0 and mia_auroc([2.0], [1.0]) == 0.0
