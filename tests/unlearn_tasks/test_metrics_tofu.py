"""TOFU metric functions against values computed by hand."""

import math

import numpy as np
import pytest
from scipy import stats

from unlearn_tasks.metrics import tofu


def test_normalised_prob_is_geometric_mean_token_probability():
    # tokens with probabilities 0.5 and 0.125: geometric mean = sqrt(0.0625) = 0.25
    lps = [math.log(0.5), math.log(0.125)]
    assert tofu.mean_logprob(lps) == pytest.approx(math.log(0.25))
    assert tofu.normalised_prob(lps) == pytest.approx(0.25)
    assert math.isnan(tofu.mean_logprob([]))


def test_option_normalised_prob():
    assert tofu.option_normalised_prob(0.6, [0.2, 0.1, 0.1]) == pytest.approx(0.6 / 1.0, rel=1e-8)


def test_truth_ratio_geometric_and_arithmetic():
    para = math.log(0.5)
    pert = [math.log(0.1), math.log(0.4)]
    # geometric: sqrt(0.1 * 0.4) / 0.5 = 0.2 / 0.5 = 0.4
    assert tofu.truth_ratio(para, pert, "geometric") == pytest.approx(0.4)
    # arithmetic (the paper): ((0.1 + 0.4) / 2) / 0.5 = 0.5
    assert tofu.truth_ratio(para, pert, "arithmetic") == pytest.approx(0.5)
    with pytest.raises(ValueError, match="truth ratio mean"):
        tofu.truth_ratio(para, pert, "harmonic")


def test_truth_ratio_statistics():
    ratios = [0.5, 2.0, 1.0, 0.25]
    # forget: min(R, 1/R) = 0.5, 0.5, 1, 0.25 -> mean 0.5625
    assert tofu.truth_ratio_forget_stat(ratios) == pytest.approx(0.5625)
    # retain: max(0, 1-R) = 0.5, 0, 0, 0.75 -> mean 0.3125
    assert tofu.truth_ratio_retain_stat(ratios) == pytest.approx(0.3125)


def test_forget_quality_is_two_sided_ks_pvalue():
    # Fully separated samples of 3 and 3: D = 1, exact two-sided p = 2 / C(6, 3) = 0.1
    assert tofu.forget_quality([1, 2, 3], [4, 5, 6]) == pytest.approx(0.1)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=50), rng.normal(0.5, size=40)
    assert tofu.forget_quality(a, b) == pytest.approx(stats.ks_2samp(a, b).pvalue)
    assert math.isnan(tofu.forget_quality([], [1.0]))


def test_model_utility_harmonic_mean():
    assert tofu.model_utility([1, 2, 4]) == pytest.approx(12 / 7)
    assert tofu.model_utility([0.5, 0.0, 1.0]) == 0.0
    assert math.isnan(tofu.model_utility([0.5, float("nan")]))


def test_open_unlearning_truth_ratio_aggregations():
    ratios = [0.5, 2.0, 1.0, 0.25]
    # closer_to_1_better = the forget statistic: 0.5625; true_better = the retain statistic: 0.3125
    assert tofu.truth_ratio_aggregate(ratios, "closer_to_1_better") == pytest.approx(0.5625)
    assert tofu.truth_ratio_aggregate(ratios, "true_better") == pytest.approx(0.3125)
    # prob_mean: p_c / (p_c + p_w) = 1 / (1 + R) = 2/3, 1/3, 1/2, 4/5 -> mean 2.3 / 4
    assert tofu.truth_ratio_aggregate(ratios, "prob_mean") == pytest.approx(0.575)
    # open-unlearning's 1 / (R + 1e-10) guard moves the value by about 1e-10 only
    assert tofu.truth_ratio_aggregate(ratios, "closer_to_1_better", eps=1e-10) == pytest.approx(0.5625, rel=1e-9)
    assert math.isnan(tofu.truth_ratio_aggregate([], "prob_mean"))
    with pytest.raises(ValueError, match="truth ratio aggregator"):
        tofu.truth_ratio_aggregate(ratios, "mean")
