"""Edge cases of the TOFU metric functions, by hand: one-token and empty inputs, the default truth-ratio mean, the
division guard of the option-normalised probability, NaN before 0 in Model Utility. Written to kill the mutants
that survived benchmarks/mutation.py (docs/testing.md, Mutation score)."""

import math
import warnings

import pytest

from unlearn_tasks.metrics.tofu import (
    forget_quality,
    mean_logprob,
    model_utility,
    normalised_prob,
    option_normalised_prob,
    truth_ratio,
    truth_ratio_forget_stat,
    truth_ratio_retain_stat,
)


def test_mean_logprob_of_one_token_and_of_none():
    assert mean_logprob([-2.0]) == -2.0 and normalised_prob([-2.0]) == pytest.approx(math.exp(-2.0))
    assert math.isnan(mean_logprob([]))


def test_option_normalised_prob_and_its_division_guard():
    assert option_normalised_prob(0.5, [0.25, 0.25]) == pytest.approx(0.5)
    assert option_normalised_prob(0.2, [0.6]) == pytest.approx(0.25)
    # the 1e-10 keeps tiny probabilities finite: 1e-10 / (1e-10 + 0 + 1e-10) = 1/2
    assert option_normalised_prob(1e-10, [0.0]) == pytest.approx(0.5)


def test_truth_ratio_default_is_the_geometric_mean():
    # perturbed mean log-probs -2 and -3, paraphrase -1: geometric exp(-2.5 + 1); arithmetic (e^-2 + e^-3) / 2 / e^-1
    assert truth_ratio(-1.0, [-2.0, -3.0]) == pytest.approx(math.exp(-1.5))
    assert truth_ratio(-1.0, [-2.0, -3.0], "arithmetic") == pytest.approx((math.exp(-2) + math.exp(-3)) / 2 / math.exp(-1))
    with pytest.raises(ValueError, match="truth ratio mean"):
        truth_ratio(-1.0, [-2.0], "GEOMETRIC")


def test_statistics_of_no_ratio_are_nan_without_a_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not numpy's "Mean of empty slice"
        assert math.isnan(truth_ratio_forget_stat([])) and math.isnan(truth_ratio_retain_stat([]))
    assert truth_ratio_forget_stat([4.0]) == 0.25 and truth_ratio_retain_stat([0.25]) == 0.75


def test_forget_quality_needs_both_populations():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # decided here, not left to scipy's warning about an empty sample
        assert math.isnan(forget_quality([], [0.5])) and math.isnan(forget_quality([0.5], []))
    assert forget_quality([0.5], [0.5]) == pytest.approx(1.0)  # one ratio each, equal: p-value 1


def test_model_utility_nan_wins_over_zero_and_empty_is_nan():
    assert math.isnan(model_utility([float("nan"), 0.0, 0.5]))
    assert model_utility([0.0, 0.5]) == 0.0  # scipy's hmean gives 0 too: `v < 0` for `v <= 0` is equivalent
    assert math.isnan(model_utility([]))
    assert model_utility([0.5]) == 0.5
    assert model_utility([0.5, 0.25]) == pytest.approx(2 / (2 + 4))
