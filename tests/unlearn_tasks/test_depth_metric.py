"""The UDS score function on hand-computed cases (no model)."""

from __future__ import annotations

import pytest

from unlearn_tasks.metrics.depth import TAU, example_depth, overall_uds, per_layer


def test_one_example_by_hand():
    # d1 = (0.02, 0.5, 1.0): layers 1 and 2 exceed tau 0.05; d2 = (0.3, 0.2, 2.0): LER 0.4 and clip(2.0) = 1
    e = example_depth(-1.0, [-1.02, -1.5, -2.0], [-1.3, -1.2, -3.0])
    assert e.ke_layers == (1, 2)
    assert e.d1 == pytest.approx((0.02, 0.5, 1.0))
    assert e.uds == pytest.approx((0.5 * 0.4 + 1.0 * 1.0) / 1.5)  # 0.8


def test_negative_ratio_is_clipped_to_zero_and_no_ke_layer_is_undefined():
    e = example_depth(-1.0, [-2.0], [-0.5])  # d1 = 1, d2 = -0.5: the unlearned patch raised the answer's log-prob
    assert e.uds == 0.0
    assert example_depth(-1.0, [-1.04, -0.5], [-3.0, -3.0]).uds is None  # d1 = 0.04 and -0.5: none above tau
    assert example_depth(-1.0, [-1.04], [-3.0], tau=0.03).uds == 1.0


def test_a_layer_whose_d1_equals_tau_is_not_knowledge_encoding():
    """The release's rule is d1 > tau, strictly: at equality (exact in binary: 0 - (-0.5) is 0.5) the layer is left
    out, and the UDS is that of the other layer alone."""
    e = example_depth(0.0, [-0.5, -0.75], [0.0, -0.375], tau=0.5)  # d1 = (0.5, 0.75), d2 = (0.0, 0.375)
    assert e.d1 == (0.5, 0.75) and e.ke_layers == (1,)
    assert e.uds == 0.5  # layer 1's LER 0.375 / 0.75; with layer 0 counted: 0.75 * 0.5 / 1.25 = 0.3
    assert example_depth(0.0, [-TAU], [-1.0]).uds is None  # the release's tau itself: no KE layer


def test_endpoints_retain_and_target():
    s1 = [-1.5, -2.5, -1.01]
    assert example_depth(-1.0, s1, s1).uds == 1.0  # unlearned == retain
    assert example_depth(-1.0, s1, [-1.0] * 3).uds == 0.0  # unlearned == target


def test_overall_and_per_layer():
    a = example_depth(-1.0, [-1.02, -1.5, -2.0], [-1.3, -1.2, -3.0])  # UDS 0.8
    b = example_depth(-2.0, [-2.0, -3.0, -2.0], [-2.0, -2.5, -2.0])  # KE layer 1 only: d1 1, d2 0.5 -> 0.5
    c = example_depth(-2.0, [-2.0, -2.0, -2.0], [-3.0, -3.0, -3.0])  # no KE layer
    assert overall_uds([a, b, c]) == pytest.approx((0.8 + 0.5) / 2)
    assert overall_uds([c]) is None
    rows = per_layer([a, b, c])
    assert [r["n_ke"] for r in rows] == [0, 2, 1]
    assert rows[0]["mean_ler"] is None and rows[0]["weighted_ler"] is None
    assert rows[1]["mean_ler"] == pytest.approx((0.4 + 0.5) / 2)
    assert rows[1]["weighted_ler"] == pytest.approx((0.5 * 0.4 + 1.0 * 0.5) / 1.5)
    assert rows[1]["mean_d1"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)
    assert rows[2]["mean_d2"] == pytest.approx((2.0 + 0.0 + 1.0) / 3)


def test_layer_counts_must_agree():
    with pytest.raises(ValueError, match="stage 1 has 2 layers, stage 2 1"):
        example_depth(0.0, [0.0, 0.0], [0.0])
