"""Membership-inference scores, AUROC and PrivLeak against values computed by hand."""

import math
import zlib

import pytest

from unlearn_tasks.metrics import mia


def test_loss_and_zlib():
    lps = [-1.0, -2.0, -3.0]
    assert mia.loss_score(lps) == pytest.approx(2.0)
    text = "Soren Brennan wrote books."
    assert mia.zlib_score(lps, text) == pytest.approx(2.0 / len(zlib.compress(text.encode())))


def test_min_k_takes_lowest_fraction_at_least_one():
    lps = [-0.1, -5.0, -0.2, -3.0, -0.3]
    # k = 0.4 of 5 tokens = 2 lowest: -5 and -3 -> score 4
    assert mia.min_k_score(lps, 0.4) == pytest.approx(4.0)
    # k = 0.1 of 5 = 0.5 -> at least one token: -5
    assert mia.min_k_score(lps, 0.1) == pytest.approx(5.0)


def test_min_k_plus_plus_z_scores():
    lps = [-1.0, -2.0, -4.0]
    mu = [-1.0, -1.0, -2.0]
    var = [1.0, 4.0, 1.0]
    # z = (0/1, -1/2, -2/1) = 0, -0.5, -2; k = 0.4 of 3 -> 1 lowest: -2 -> score 2
    assert mia.min_k_plus_plus_score(lps, mu, var, 0.4) == pytest.approx(2.0)
    # k = 0.7 -> 2 lowest: (-2 - 0.5) / 2 = -1.25 -> 1.25
    assert mia.min_k_plus_plus_score(lps, mu, var, 0.7) == pytest.approx(1.25)


def test_auroc_forget_label_zero_holdout_label_one():
    # forget losses low (memorised), holdout high: perfect separation -> 1
    assert mia.mia_auroc([0.1, 0.2], [1.0, 2.0]) == pytest.approx(1.0)
    # forget [1, 3], holdout [2, 4]: holdout > forget in 3 of 4 pairs -> 0.75
    assert mia.mia_auroc([1.0, 3.0], [2.0, 4.0]) == pytest.approx(0.75)
    assert math.isnan(mia.mia_auroc([], [1.0]))


def test_privleak_matches_muse_convention():
    # AUC 0.9 vs reference 0.5: ((0.1) - (0.5)) / 0.5 * 100 = -80
    assert mia.privleak(0.9, 0.5) == pytest.approx(-80.0)
    assert mia.privleak(0.5, 0.5) == pytest.approx(0.0)
    assert math.isnan(mia.privleak(0.3, 1.0))
