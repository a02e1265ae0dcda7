"""U-LiRA against hand-computed values and an explicit cross-validation loop."""

from __future__ import annotations

import math

import numpy as np
import pytest

from unlearn_tasks.metrics.klom import KlomInputError
from unlearn_tasks.metrics.ulira import attack_metrics, cross_validated_scores, fit_gaussians, ulira, ulira_scores


def test_fit_gaussians_hand_values():
    mean, std = fit_gaussians(np.array([[1.0, 5.0, 0.0], [3.0, 5.0, 4.0]]))
    assert mean.tolist() == [2.0, 5.0, 2.0]
    assert std.tolist() == [1.0, 1e-3, 2.0]  # the constant example is floored at min_std
    _, std = fit_gaussians(np.array([[1.0, 5.0, 0.0], [3.0, 5.0, 4.0]]), "global")
    assert std.tolist() == [1.0, 1.0, 1.0]  # median of (1, 0, 2)


def test_scores_hand_values():
    u = np.array([[1.0, -2.0], [3.0, 2.0]])  # mu_U = (2, 0), sd_U = (1, 2)
    o = np.array([[-1.0, -1.0], [1.0, 1.0]])  # mu_O = (0, 0), sd_O = (1, 1)
    got = ulira_scores(np.array([2.0, 0.0]), u, o)
    # example 0: log N(2; 2, 1) - log N(2; 0, 1) = 0 + 2^2 / 2; example 1: log(1/2) - log(1/1)
    assert got == pytest.approx([2.0, -math.log(2)], abs=1e-12)
    assert ulira_scores(np.array([[2.0, 0.0], [0.0, 0.0]]), u, o).shape == (2, 2)


def test_attack_metrics_hand_values():
    got = attack_metrics(np.array([1.0, -1.0, 2.0]), np.array([-1.0, -2.0, 0.5]))
    assert got["tpr"] == pytest.approx(2 / 3) and got["tnr"] == pytest.approx(2 / 3)
    assert got["accuracy"] == pytest.approx(2 / 3)
    # positives beat negatives in 7 of 9 pairs, one tie (-1 vs -1) counts 1/2
    assert got["auroc"] == pytest.approx(7.5 / 9)


@pytest.mark.parametrize("variance", ["per-example", "global"])
def test_cross_validation_equals_loop(variance):
    rng = np.random.default_rng(0)
    u, o = rng.normal(1, 2, (6, 40)), rng.normal(0, 1, (5, 40))
    su, so = cross_validated_scores(u, o, variance=variance)  # 5 folds: fold 0 = unlearned 0 and 5, oracle 0
    for i in range(6):
        f = i % 5
        shadows_u = np.delete(u, [j for j in range(6) if j % 5 == f], axis=0)
        shadows_o = np.delete(o, f, axis=0)
        assert np.max(np.abs(su[i] - ulira_scores(u[i], shadows_u, shadows_o, variance=variance))) < 1e-12
    for j in range(5):
        shadows_u = np.delete(u, [i for i in range(6) if i % 5 == j], axis=0)
        want = ulira_scores(o[j], shadows_u, np.delete(o, j, axis=0), variance=variance)
        assert np.max(np.abs(so[j] - want)) < 1e-12


def test_small_identical_ensembles_are_not_biased():
    """4 + 4 models from one distribution: chance level (leaving out only the target's own model is biased below 0.5)."""
    rng = np.random.default_rng(5)
    summary, _ = ulira(rng.normal(0, 1, (4, 5000)), rng.normal(0, 1, (4, 5000)), variance="global")
    assert abs(summary["auroc"] - 0.5) < 0.02 and abs(summary["accuracy"] - 0.5) < 0.02


def test_attack_separates_and_not():
    rng = np.random.default_rng(1)
    far_u, far_o = rng.normal(20, 1, (8, 30)), rng.normal(-20, 1, (8, 30))
    summary, per_example = ulira(far_u, far_o)
    assert summary["auroc"] == 1.0 and summary["accuracy"] == 1.0
    assert summary["protocol"] == "8-fold" and summary["n_samples"] == 30
    assert np.all(per_example == 1.0)
    same_u, same_o = rng.normal(0, 1, (40, 300)), rng.normal(0, 1, (40, 300))
    summary, _ = ulira(same_u, same_o, indices=range(100))
    assert abs(summary["auroc"] - 0.5) < 0.05 and abs(summary["accuracy"] - 0.5) < 0.06
    assert summary["n_samples"] == 100


def test_explicit_targets_and_indices():
    rng = np.random.default_rng(2)
    u, o = rng.normal(2, 1, (10, 20)), rng.normal(-2, 1, (10, 20))
    tu, to = rng.normal(2, 1, (3, 20)), rng.normal(-2, 1, (2, 20))
    summary, per_example = ulira(u, o, [0, 3, 5], target_unlearned=tu, target_oracle=to)
    assert summary["protocol"] == "targets"
    assert (summary["n_unlearned_targets"], summary["n_oracle_targets"], summary["n_samples"]) == (3, 2, 3)
    su = ulira_scores(tu[:, [0, 3, 5]], u[:, [0, 3, 5]], o[:, [0, 3, 5]])
    so = ulira_scores(to[:, [0, 3, 5]], u[:, [0, 3, 5]], o[:, [0, 3, 5]])
    assert summary["auroc"] == pytest.approx(attack_metrics(su, so)["auroc"])
    assert np.isnan(per_example[1]) and not np.isnan(per_example[3])


def test_errors():
    u = np.zeros((3, 4))
    with pytest.raises(KlomInputError, match="needs 2 <= folds"):
        ulira(u, np.zeros((1, 4)))
    with pytest.raises(KlomInputError, match="both target ensembles"):
        ulira(u, u, target_unlearned=u)
    with pytest.raises(KlomInputError, match="target has 3 samples"):
        ulira_scores(np.zeros(3), u, u)
    with pytest.raises(KlomInputError, match="unknown variance"):
        ulira(u, u, variance="pooled")
    with pytest.raises(KlomInputError, match="out of range"):
        ulira(u, u, [7])


# --------------------------------------------------------------------------- issue 29
def test_infinite_margins_are_clipped_like_klom_and_min_std_must_be_positive():
    from unlearn_tasks.metrics.klom import KlomInputError
    from unlearn_tasks.metrics.ulira import ulira, ulira_scores

    rng = np.random.default_rng(0)
    u, o = rng.normal(5, 1, (4, 6)), rng.normal(0, 1, (4, 6))
    u_inf, o_inf = u.copy(), o.copy()
    u_inf[0, 1], u_inf[2, 3], o_inf[1, 4] = np.inf, np.inf, -np.inf  # vLLM margins above about 16
    u_100, o_100 = u.copy(), o.copy()
    u_100[0, 1], u_100[2, 3], o_100[1, 4] = 100.0, 100.0, -100.0
    summary, per_example = ulira(u_inf, o_inf)
    expected, expected_per_example = ulira(u_100, o_100)
    assert summary == expected and np.isfinite(summary["auroc"])
    np.testing.assert_array_equal(per_example, expected_per_example)
    # one target at +inf is scored as one at 100: hand-computed Gaussians N(mu, sd) of the shadows
    shadow_u, shadow_o = np.array([[1.0], [3.0]]), np.array([[-1.0], [1.0]])  # mu 2 / 0, sd 1 / 1
    expected_score = (-0.5 * (100 - 2) ** 2) - (-0.5 * (100 - 0) ** 2)
    assert ulira_scores(np.array([np.inf]), shadow_u, shadow_o)[0] == pytest.approx(expected_score)
    constant = np.ones((3, 4))
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(KlomInputError, match="min_std must be a finite number > 0"):
            ulira(constant, constant + 1, min_std=bad)
    assert ulira(constant, constant + 1, min_std=1e-3)[0]["auroc"] == 1.0
