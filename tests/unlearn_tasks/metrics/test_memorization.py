"""Issue 26, item 1: extraction strength and exact memorization against hand computations, with open-unlearning's
edge cases (no matching suffix, empty answer)."""

import math

import pytest

from unlearn_tasks.metrics.memorization import (
    exact_memorization,
    extraction_strength,
    matching_suffix_start,
    mean_score,
)


def test_exact_memorization_is_the_fraction_of_correct_argmax_tokens():
    assert exact_memorization([1, 2, 9, 4], [1, 2, 3, 4]) == pytest.approx(0.75)
    assert exact_memorization([7, 7], [1, 2]) == 0.0
    assert exact_memorization([], []) is None


@pytest.mark.parametrize("mode", ["definition", "open-unlearning"])
def test_extraction_strength_is_the_longest_correct_suffix(mode):
    # predictions right from position 2 on: k = 2 of n = 5 -> 1 - 2/5
    assert matching_suffix_start([9, 9, 3, 4, 5], [1, 2, 3, 4, 5]) == 2
    assert extraction_strength([9, 9, 3, 4, 5], [1, 2, 3, 4, 5], mode) == pytest.approx(0.6)
    # a wrong token in the middle cuts the suffix even if the start is right: k = 3 of 4
    assert extraction_strength([1, 2, 0, 4], [1, 2, 3, 4], mode) == pytest.approx(0.25)
    assert extraction_strength([1, 2, 3], [1, 2, 3], mode) == 1.0


def test_no_matching_suffix_is_zero_by_definition_and_one_over_n_in_open_unlearning():
    # the last token is wrong: no suffix matches; OU's loop ends at k = n - 1 -> 1/n
    assert matching_suffix_start([1, 2, 0], [1, 2, 3]) == 3
    assert extraction_strength([1, 2, 0], [1, 2, 3], "definition") == 0.0
    assert extraction_strength([1, 2, 0], [1, 2, 3], "open-unlearning") == pytest.approx(1 / 3)
    assert extraction_strength([0], [3], "open-unlearning") == 1.0  # n = 1: OU's k stays 0


def test_empty_answer_es_is_zero_in_open_unlearning_and_left_out_by_definition():
    assert extraction_strength([], [], "open-unlearning") == 0.0
    assert extraction_strength([], [], "definition") is None
    # OU's means: ES's 0 counts, EM's None is left out
    assert mean_score([1.0, 0.5, 0.0]) == pytest.approx(0.5)
    assert mean_score([1.0, 0.5, None]) == pytest.approx(0.75)
    assert math.isnan(mean_score([None]))


def test_mismatched_lengths_and_unknown_modes_are_refused():
    with pytest.raises(ValueError, match="2 predictions for 3 answer tokens"):
        exact_memorization([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="mode must be one of"):
        extraction_strength([1], [1], "ou")
