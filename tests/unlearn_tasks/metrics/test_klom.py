"""KLoM against hand-computed values and against a straightforward per-sample loop written here."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from unlearn_tasks.metrics.klom import (
    KlomInputError,
    klom,
    klom_per_sample,
    margins_from_logits,
    margins_from_logprobs,
    reduce_token_margins,
    summarize,
)


# --------------------------------------------------------------------------- the reference loop
def loop_klom(u: np.ndarray, o: np.ndarray, direction: str = "unlearned-oracle", binning: str = "easydub") -> np.ndarray:
    """One sample at a time, as the releases do it (np.digitize per sample)."""
    out = []
    for j in range(u.shape[1]):
        a, b = (u[:, j], o[:, j]) if direction == "unlearned-oracle" else (o[:, j], u[:, j])
        if binning == "a2d":
            a = np.clip(a, -100, 100)
            n_edges, kept = 20, range(0, 20)
        else:
            a, b = np.clip(a, -100, 100), np.clip(b, -100, 100)
            n_edges, kept = 21, range(1, 21)
        lo, hi = min(a.min(), b.min()), max(a.max(), b.max())
        if lo >= hi:
            hi = lo + 1
        edges = np.linspace(lo, hi, n_edges)
        ia, ib = np.digitize(a, edges), np.digitize(b, edges)
        ca = np.array([np.sum(ia == k) for k in kept], dtype=float)
        cb = np.array([np.sum(ib == k) for k in kept], dtype=float)
        p = ca / ca.sum() if ca.sum() else np.zeros_like(ca)
        q = cb / cb.sum() if cb.sum() else np.zeros_like(cb)
        if binning == "a2d":
            with np.errstate(invalid="ignore"):
                out.append(scipy.stats.entropy(p, np.clip(q, 1e-5, None)))
            continue
        q_safe = np.where(p > 0, np.maximum(q, 1e-5), q)
        if binning == "dub-main":
            with np.errstate(invalid="ignore"):
                out.append(scipy.stats.entropy(pk=p, qk=q_safe))
        else:
            out.append(sum(p[k] * math.log(p[k] / q_safe[k]) for k in range(len(p)) if p[k] > 0))
    return np.array(out, dtype=float)


def _ensembles(rng: np.random.Generator, n_u: int, n_o: int, n: int, dtype=np.float64) -> tuple[np.ndarray, np.ndarray]:
    """Random margins with the awkward cases mixed in: ties, integer values on bin edges, values beyond the
    clip, constant samples, one ensemble entirely above the other."""
    u = rng.normal(0, 3, (n_u, n)) + rng.normal(0, 2, n)
    o = rng.normal(0, 3, (n_o, n))
    u[:, ::7] = np.round(u[:, ::7])
    o[:, ::7] = np.round(o[:, ::7])
    u[:, 3::11] *= 80
    o[:, 5::13] = -250
    u[:, 2::17] = 4.0
    o[:, 2::17] = 4.0
    u[:, 4::19] = 9.0
    o[:, 4::19] = rng.normal(0, 1, (n_o, o[:, 4::19].shape[1]))
    u[0, 6::23] = np.inf
    return u.astype(dtype), o.astype(dtype)


# --------------------------------------------------------------------------- hand-computed
# Sample 0: lo = 0, hi = 20, so the 21 edges are the integers 0..20. u = [0, 0, 5, 20]: the 20 sits on the upper
# edge and is dropped, p = {bin 1: 2/3, bin 6: 1/3}. o = [0, 5, 5, 7]: q = {bin 1: 1/4, bin 6: 1/2, bin 8: 1/4}.
# Sample 1: constant (every margin 3): hi = lo + 1, everything in bin 1, KLoM = 0.
HAND_U = np.array([[0.0, 3.0], [0.0, 3.0], [5.0, 3.0], [20.0, 3.0]])
HAND_O = np.array([[0.0, 3.0], [5.0, 3.0], [5.0, 3.0], [7.0, 3.0]])
KL_UO = 2 / 3 * math.log((2 / 3) / (1 / 4)) + 1 / 3 * math.log((1 / 3) / (1 / 2))
# KL(o || u): bin 8 has no unlearned mass, so q_safe = 1e-5 there.
KL_OU = 1 / 4 * math.log((1 / 4) / (2 / 3)) + 1 / 2 * math.log((1 / 2) / (1 / 3)) + 1 / 4 * math.log((1 / 4) / 1e-5)


def test_hand_computed_both_directions():
    assert klom_per_sample(HAND_U, HAND_O) == pytest.approx([KL_UO, 0.0], abs=1e-15)
    assert klom_per_sample(HAND_U, HAND_O, direction="oracle-unlearned") == pytest.approx([KL_OU, 0.0], abs=1e-15)
    assert KL_UO == pytest.approx(0.5187, abs=1e-4)  # 2/3 ln(8/3) + 1/3 ln(2/3)


def test_dub_main_renormalises_q_safe():
    # u||o: no eps was added, q_safe already sums to 1. o||u: q_safe sums to 1 + 1e-5.
    assert klom_per_sample(HAND_U, HAND_O, binning="dub-main") == pytest.approx([KL_UO, 0.0], abs=1e-15)
    got = klom_per_sample(HAND_U, HAND_O, binning="dub-main", direction="oracle-unlearned")
    assert got == pytest.approx([KL_OU + math.log(1 + 1e-5), 0.0], abs=1e-15)


def test_a2d_binning_hand_computed():
    # 20 edges: with lo = 0 and hi = 19 they are the integers 0..19; 19 is dropped, indices 0..19 are counted.
    u = np.array([[0.0], [0.0], [5.0], [19.0]])
    o = np.array([[0.0], [5.0], [5.0], [7.0]])
    # p = {1: 2/3, 6: 1/3}, q = {1: 1/4, 6: 1/2, 8: 1/4}; the other 17 bins get 1e-5, then q is renormalised.
    expected = KL_UO + math.log(1 + 17e-5)
    assert klom_per_sample(u, o, binning="a2d")[0] == pytest.approx(expected, abs=1e-15)
    # only the first ensemble is clipped: an oracle margin of -150 stretches the bins, an unlearned one does not
    u, o = np.array([[-150.0], [0.0]]), np.array([[-100.0], [0.0]])
    assert klom_per_sample(u, o, binning="a2d")[0] == pytest.approx(math.log(1 + 19e-5), abs=1e-15)
    u, o = np.array([[-100.0], [0.0]]), np.array([[-150.0], [0.0]])
    assert klom_per_sample(u, o, binning="a2d")[0] == pytest.approx(math.log((1 + 19e-5) / 1e-5), abs=1e-12)


def test_clipping_and_dropped_top_edge():
    # both clipped to [-100, 100] -> identical ensembles
    assert klom_per_sample(np.array([[-300.0], [0.0]]), np.array([[-100.0], [0.0]]))[0] == 0.0
    # the unlearned ensemble lies entirely on hi: nothing counted, p = 0, KLoM = 0 (EasyDUB); scipy gives NaN
    u, o = np.array([[5.0], [5.0]]), np.array([[3.0], [3.0]])
    assert klom_per_sample(u, o)[0] == 0.0
    assert np.isnan(klom_per_sample(u, o, binning="dub-main")[0])
    # an infinite margin is clipped to 100 like any other
    assert klom_per_sample(np.array([[np.inf], [0.0]]), np.array([[100.0], [0.0]]))[0] == 0.0


def test_model_counts_may_differ():
    u = np.array([[0.0], [20.0]])  # p = {bin 1: 1}
    o = np.array([[0.0], [0.0], [10.0], [20.0], [20.0]])  # q over counted values = {1: 2/3, 11: 1/3}
    assert klom_per_sample(u, o)[0] == pytest.approx(math.log(3 / 2), abs=1e-15)


# --------------------------------------------------------------------------- against the loop
@pytest.mark.parametrize("binning", ["easydub", "dub-main", "a2d"])
@pytest.mark.parametrize("direction", ["unlearned-oracle", "oracle-unlearned"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_vectorised_equals_loop(binning, direction, dtype):
    rng = np.random.default_rng(7)
    u, o = _ensembles(rng, 9, 6, 600, dtype)
    if binning == "a2d":
        u[np.isinf(u)] = 1e3
    got = klom_per_sample(u, o, direction=direction, binning=binning, chunk_size=97)
    want = loop_klom(u, o, direction, binning)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.nanmax(np.abs(got - want)) <= 1e-9
    assert (got[~np.isnan(got)] > 0).mean() > 0.5  # the data is not trivially zero


def test_chunking_does_not_change_values():
    rng = np.random.default_rng(1)
    u, o = _ensembles(rng, 5, 5, 300)
    assert np.array_equal(klom_per_sample(u, o, chunk_size=1), klom_per_sample(u, o, chunk_size=10_000))


# --------------------------------------------------------------------------- splits and summaries
def test_klom_splits_and_summary():
    rng = np.random.default_rng(3)
    u, o = _ensembles(rng, 6, 6, 200)
    summary, per_sample = klom(u, o, {"forget": [0, 1, 2, 3], "retain": list(range(10, 60))})
    values = loop_klom(u, o)
    assert summary["direction"] == "unlearned-oracle" and summary["binning"] == "easydub"
    forget = summary["splits"]["forget"]
    assert forget["n"] == 4
    assert forget["mean"] == pytest.approx(values[:4].mean(), abs=1e-12)
    assert forget["p95"] == pytest.approx(np.percentile(values[:4], 95), abs=1e-12)
    assert np.isnan(per_sample[5]) and not np.isnan(per_sample[10])
    whole, _ = klom(u, o)
    assert list(whole["splits"]) == ["all"] and whole["splits"]["all"]["n"] == 200


def test_summarize_hand_values():
    s = summarize(np.arange(21, dtype=float))  # p95 of 0..20 with linear interpolation = 19
    assert s == {"p95": 19.0, "mean": 10.0, "n": 21}
    s = summarize(np.array([1.0, np.nan, 3.0]))
    assert s["mean"] == 2.0 and s["n"] == 3 and s["n_undefined"] == 1


# --------------------------------------------------------------------------- errors
def test_errors_name_the_problem():
    u = np.zeros((3, 5))
    with pytest.raises(KlomInputError, match="5 samples per model but the oracle ensemble has 4"):
        klom_per_sample(u, np.zeros((3, 4)))
    bad = u.copy()
    bad[1, 2] = np.nan
    with pytest.raises(KlomInputError, match=r"unlearned margins contain 1 NaN values \(first: model 1, sample 2\)"):
        klom_per_sample(bad, u)
    with pytest.raises(KlomInputError, match="split 'forget' is empty"):
        klom(u, u, {"forget": []})
    with pytest.raises(KlomInputError, match="index 5 is out of range for 5 samples"):
        klom(u, u, {"retain": [0, 5]})
    with pytest.raises(KlomInputError, match="2-D array"):
        klom_per_sample(np.zeros(5), u)
    with pytest.raises(KlomInputError, match="oracle ensemble has no models"):
        klom_per_sample(u, np.zeros((0, 5)))
    with pytest.raises(KlomInputError, match="unknown direction"):
        klom_per_sample(u, u, direction="sideways")
    with pytest.raises(KlomInputError, match="unknown binning"):
        klom_per_sample(u, u, binning="sturges")


# --------------------------------------------------------------------------- margins
def test_margins_from_logits_hand_values():
    logits = np.array([[2.0, 0.0, 0.0], [0.0, 1.0, 3.0]])
    got = margins_from_logits(logits, [0, 1])
    assert got == pytest.approx([2 - math.log(2), 1 - math.log(1 + math.exp(3))], abs=1e-15)
    # the same quantity as log p - log(1 - p)
    logp = logits - scipy.special.logsumexp(logits, axis=1, keepdims=True)
    assert margins_from_logprobs(logp[[0, 1], [0, 1]]) == pytest.approx(got, abs=1e-12)


def test_margins_stable_at_extremes():
    logits = np.array([[1000.0, 0.0, -1000.0], [0.0, 800.0, 800.0]])
    got = margins_from_logits(logits, [0, 0])
    assert got == pytest.approx([1000.0, -800.0 - math.log(2)], abs=1e-9)
    # p very close to 1: log(1 - p) from expm1 keeps the precision
    assert margins_from_logprobs([-1e-30])[0] == pytest.approx(-math.log(1e-30), rel=1e-12)
    assert margins_from_logprobs([0.0])[0] == np.inf
    assert margins_from_logprobs([math.log(0.5)])[0] == pytest.approx(0.0, abs=1e-15)


def test_margins_from_logits_batched_and_errors():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(4, 6, 10))
    y = rng.integers(0, 10, size=(4, 6))
    got = margins_from_logits(z, y)
    assert got.shape == (4, 6)
    assert got[2, 3] == pytest.approx(z[2, 3, y[2, 3]] - scipy.special.logsumexp(np.delete(z[2, 3], y[2, 3])), abs=1e-12)
    with pytest.raises(KlomInputError, match=r"labels must lie in \[0, 9\]"):
        margins_from_logits(z[0], np.full(6, 10))
    with pytest.raises(KlomInputError, match="one label per row"):
        margins_from_logits(z[0], [0, 1])
    with pytest.raises(KlomInputError, match="at least 2 classes"):
        margins_from_logits(np.zeros((3, 1)), [0, 0, 0])


def test_reduce_token_margins():
    assert reduce_token_margins([1.0, 2.0, 6.0]) == 3.0
    assert reduce_token_margins([1.0, 2.0, 6.0], "sum") == 9.0
    with pytest.raises(KlomInputError, match="'mean' or 'sum'"):
        reduce_token_margins([1.0], "max")


def test_digitize_columns_equals_np_digitize_for_any_edges():
    from unlearn_tasks.metrics.klom import digitize_columns

    rng = np.random.default_rng(4)
    edges = np.sort(rng.normal(0, 3, (21, 50)), axis=0)  # not evenly spaced: the guess is often wrong
    edges[:, 0] = np.linspace(-1.0, 1.0, 21)
    x = rng.normal(0, 4, (30, 50))
    x[0] = edges[5]  # values exactly on edges
    x[1, :3] = [np.inf, -np.inf, edges[-1, 2]]
    got = digitize_columns(x, edges)
    want = np.stack([np.digitize(x[:, j], edges[:, j]) for j in range(50)], axis=1)
    assert np.array_equal(got, want)


# --------------------------------------------------------------------------- issue 29
def test_chunk_size_never_changes_the_result_and_must_be_positive():
    from unlearn_tasks.metrics.klom import KlomInputError, klom, klom_per_sample

    rng = np.random.default_rng(3)
    u, o = rng.normal(0, 1, (8, 23)), rng.normal(1, 2, (8, 23))
    whole = klom_per_sample(u, o, chunk_size=512)
    for size in (1, 3, 22, 23):
        np.testing.assert_array_equal(klom_per_sample(u, o, chunk_size=size), whole)
    for bad in (0, -1, 2.5, True):
        with pytest.raises(KlomInputError, match=r"chunk_size must be an integer >= 1"):
            klom_per_sample(u, o, chunk_size=bad)
        with pytest.raises(KlomInputError, match=r"chunk_size must be an integer >= 1"):
            klom(u, o, chunk_size=bad)


def test_repeated_and_boolean_split_indices_are_refused():
    from unlearn_tasks.metrics.klom import KlomInputError, klom

    u, o = np.zeros((2, 5)), np.ones((2, 5))
    with pytest.raises(KlomInputError, match=r"split 'forget': index 3 appears 2 times \(1 repeated indices\)"):
        klom(u, o, {"forget": [1, 3, 3]})
    with pytest.raises(KlomInputError, match=r"split 'forget': sample indices must be integers, not true/false"):
        klom(u, o, {"forget": [True, 2]})
    with pytest.raises(KlomInputError, match="not true/false"):
        klom(u, o, {"forget": np.array([True, False])})
