"""TOFU's corpus aggregation, from per-item records to every metric, against values computed by hand.

The records are chosen so that every number differs from every other one it could be confused with: each split's
truth-ratio statistic differs under the forget formula ``mean(min(R, 1/R))`` and the retain formula
``mean(max(0, 1 - R))``; none of Model Utility's nine inputs is 0, 1 or NaN; the four MIA attacks give four different
AUROCs and the reference's four AUROCs differ too. So using one split's statistic for another, dropping or swapping a
Model Utility input, or reading the wrong attack changes a metric below.
"""

import math

import pytest

from unlearn_tasks.reference_logs import record_format
from unlearn_tasks.tofu.aggregate import (
    UTILITY_METRICS,
    ReferenceData,
    compute_metrics,
    forget_truth_ratios,
    metric_names,
    reference_record,
)

#: split -> per-item (rougeL_recall, prob, truth_ratio)
ITEMS = {
    "forget": [(1.0, 0.9, 2.0), (0.5, 0.7, 0.5)],
    "retain": [(0.4, 0.5, 0.25), (0.6, 0.7, 0.5)],
    "ra": [(0.8, 0.3, 0.2), (1.0, 0.5, 0.6)],
    "wf": [(0.2, 0.6, 0.2), (0.4, 1.0, 0.4)],
}
#: attack -> (forget scores, holdout scores); loss-like, holdout = label 1
MIA = {
    "mia_loss": ([1.0, 2.0], [3.0, 4.0]),  # every holdout above every forget: AUROC 1
    "mia_zlib": ([4.0, 3.0], [1.0, 2.0]),  # every holdout below: AUROC 0
    "mia_min_k": ([1.0, 3.0], [2.0, 4.0]),  # 3 of 4 pairs ordered: AUROC 3/4
    "mia_min_k_plus_plus": ([1.0, 4.0], [2.0, 3.0]),  # 2 of 4 pairs: AUROC 1/2
    "mia_gradnorm": ([1.0, 2.0], [3.0, 1.5]),  # 3 of 4 pairs: AUROC 3/4
}
#: open-unlearning's memorization scores of the two forget items (per record, in ITEMS order)
MEMORIZATION_SCORES = {"extraction_strength": [0.5, 0.25], "exact_memorization": [1.0, 0.5]}


def _records() -> list[dict]:
    records = []
    for split, items in ITEMS.items():
        for i, (rouge, prob, ratio) in enumerate(items):
            rec = {"split": split, "index": 1 - i, "rougeL_recall": rouge, "prob": prob, "truth_ratio": ratio}
            if split == "forget":
                rec.update({key: scores[0][i] for key, scores in MIA.items()})
                rec.update({key: scores[i] for key, scores in MEMORIZATION_SCORES.items()})
            records.append(rec)
    for i in range(2):
        records.append({"split": "holdout", "index": i, **{key: scores[1][i] for key, scores in MIA.items()}})
    return records


def _reference(ratios=(0.1, 0.2, 0.3)) -> ReferenceData:
    aucs = {"mia_loss_auc": 0.9, "mia_zlib_auc": 0.8, "mia_min_k_auc": 0.5, "mia_min_k_plus_plus_auc": 0.6}
    # the reference model's answer losses in item order: forget items 0, 1 and holdout items 0, 1
    return ReferenceData(forget_truth_ratios=list(ratios), mia_auc=aucs,
                         losses={"forget": [1.5, 0.0], "holdout": [1.0, 3.2]})


#: The hand-computed expectation for _records() and _reference().
EXPECTED = {
    "forget_rougeL_recall": 0.75, "forget_prob": 0.8,
    "forget_truth_ratio": (0.5 + 0.5) / 2,  # min(R, 1/R) of 2.0 and 0.5
    "retain_rougeL_recall": 0.5, "retain_prob": 0.6,
    "retain_truth_ratio": (0.75 + 0.5) / 2,  # max(0, 1 - R) of 0.25 and 0.5
    "ra_rougeL_recall": 0.9, "ra_prob": 0.4,
    "ra_truth_ratio": (0.8 + 0.4) / 2,
    "wf_rougeL_recall": 0.3, "wf_prob": 0.8,
    "wf_truth_ratio": (0.8 + 0.6) / 2,
    "mia_loss_auc": 1.0, "mia_zlib_auc": 0.0, "mia_min_k_auc": 0.75, "mia_min_k_plus_plus_auc": 0.5,
    # harmonic mean of the nine: retain (prob, rouge, TR), ra (...), wf (...)
    "model_utility": 9 / (1 / 0.6 + 1 / 0.5 + 1 / 0.625 + 1 / 0.4 + 1 / 0.9 + 1 / 0.6 + 1 / 0.8 + 1 / 0.3 + 1 / 0.7),
    # forget ratios {0.5, 2.0} all above the reference's {0.1, 0.2, 0.3}: KS D = 1; exact two-sided p = 2 / C(5, 2)
    "forget_quality": 2 / 10,
    # min_k: ((1 - 0.75) - (1 - 0.5)) / (1 - 0.5) * 100
    "privleak": -50.0,
    # means over the forget items
    "extraction_strength": (0.5 + 0.25) / 2, "exact_memorization": (1.0 + 0.5) / 2,
    # loss minus the reference's, per item (the forget records' index is 1 - i: item 0 has loss 2.0, item 1 1.0):
    # forget (2.0 - 1.5, 1.0 - 0.0) = (0.5, 1.0); holdout (3.0 - 1.0, 4.0 - 3.2) = (2.0, 0.8): 3 of 4 pairs ordered
    "mia_reference_auc": 0.75,
    "mia_gradnorm_auc": 0.75,
}


def test_every_metric_by_hand():
    got = compute_metrics(_records(), _reference())
    assert set(got) == set(EXPECTED) == set(metric_names(["generation", "likelihood"], gradnorm=True))
    for name, value in EXPECTED.items():
        assert got[name] == pytest.approx(value, abs=1e-12), name


def test_model_utility_has_nine_distinct_non_degenerate_inputs():
    got = compute_metrics(_records(), _reference())
    inputs = [got[m] for m in UTILITY_METRICS]
    assert len(UTILITY_METRICS) == 9 and all(0 < v < 1 for v in inputs)
    assert {m.rsplit("_", 1)[-1] for m in UTILITY_METRICS} >= {"prob", "recall", "ratio"}
    # leaving any one input out changes the harmonic mean (no input equals the mean)
    assert all(abs(v - EXPECTED["model_utility"]) > 1e-3 for v in inputs)


def test_truth_ratio_statistic_per_split():
    # The forget formula applied to the other splits would give 0.375, 0.4 and 0.3 instead.
    got = compute_metrics(_records(), None)
    assert (got["retain_truth_ratio"], got["ra_truth_ratio"], got["wf_truth_ratio"]) == pytest.approx((0.625, 0.6, 0.7))
    # and the retain formula on the forget set would give 0.25
    assert got["forget_truth_ratio"] == pytest.approx(0.5)


def _exact_ks_pvalue(sample, reference) -> float:
    """Two-sided exact KS p-value by enumeration: every way to place len(sample) items among the pooled sorted
    values is equally likely under the null; p = share of placements whose ECDF gap reaches the observed one."""
    from itertools import combinations

    n, m = len(sample), len(reference)
    pooled = sorted([(v, 1) for v in sample] + [(v, 0) for v in reference])

    def gap(is_sample):
        d = fc = rc = 0
        for s in is_sample:
            fc, rc = fc + s, rc + (1 - s)
            d = max(d, abs(fc / n - rc / m))
        return d

    observed = gap([s for _, s in pooled])
    gaps = [gap([int(i in c) for i in range(n + m)]) for c in combinations(range(n + m), n)]
    return sum(d >= observed - 1e-12 for d in gaps) / len(gaps)


def test_forget_quality_uses_the_forget_ratios_in_item_order():
    recs = _records()
    assert forget_truth_ratios(recs) == [0.5, 2.0]  # item 0 is the second forget record
    assert compute_metrics(recs, _reference((0.5, 2.0)))["forget_quality"] == pytest.approx(1.0)
    assert _exact_ks_pvalue([0.5, 2.0], [0.1, 0.2, 0.3]) == pytest.approx(EXPECTED["forget_quality"])
    for ref in [(0.1, 0.2, 0.3, 3.0), (0.4, 1.0, 3.0), (0.3, 0.6, 0.7, 0.8, 0.9)]:
        expected = _exact_ks_pvalue([0.5, 2.0], ref)
        assert compute_metrics(recs, _reference(ref))["forget_quality"] == pytest.approx(expected), ref
        # the retain split's ratios would give another p-value
        assert _exact_ks_pvalue([0.25, 0.5], ref) != pytest.approx(expected)


def test_privleak_reads_the_min_k_reference_auc():
    ref = _reference()
    ref.mia_auc["mia_min_k_auc"] = 0.25  # ((1 - 0.75) - 0.75) / 0.75 * 100
    assert compute_metrics(_records(), ref)["privleak"] == pytest.approx(-200 / 3)
    ref.mia_auc.pop("mia_min_k_auc")
    assert math.isnan(compute_metrics(_records(), ref)["privleak"])


def test_without_reference_or_population_the_metric_is_nan():
    got = compute_metrics(_records(), None)
    assert math.isnan(got["forget_quality"]) and math.isnan(got["privleak"])
    assert got["model_utility"] == pytest.approx(EXPECTED["model_utility"])
    no_holdout = [r for r in _records() if r["split"] != "holdout"]
    got = compute_metrics(no_holdout, _reference())
    assert all(math.isnan(got[f"mia_{a}_auc"]) for a in ("loss", "zlib", "min_k", "min_k_plus_plus"))
    no_wf = [r for r in _records() if r["split"] != "wf"]
    got = compute_metrics(no_wf, _reference())
    assert math.isnan(got["wf_truth_ratio"]) and math.isnan(got["model_utility"])
    assert got["retain_truth_ratio"] == pytest.approx(0.625)


def test_empty_populations_are_nan_without_a_warning():
    import warnings

    only_forget = [r for r in _records() if r["split"] == "forget"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NaN decided here, not numpy's "Mean of empty slice"
        got = compute_metrics(only_forget, None)
    assert got["forget_prob"] == pytest.approx(0.8)
    assert all(math.isnan(got[f"retain_{m}"]) for m in ("prob", "rougeL_recall", "truth_ratio"))


def test_reference_record_by_hand():
    recs = _records()
    recs[0]["qkey"], recs[1]["qkey"] = "q-second", "q-first"  # record 0 is item 1, record 1 is item 0
    metrics = compute_metrics(recs, _reference())
    ref = reference_record(recs, metrics, "forget01", {"answer_scoring": "tofu"})
    assert ref == {
        "format": record_format("tofu"), "forget_split": "forget01", "n_forget": 2,
        "forget_truth_ratio": [0.5, 2.0], "forget_question_keys": ["q-first", "q-second"],
        "mia_auc": {"mia_loss_auc": 1.0, "mia_zlib_auc": 0.0, "mia_min_k_auc": 0.75, "mia_min_k_plus_plus_auc": 0.5},
        "mia_loss": {"forget": [2.0, 1.0], "holdout": [3.0, 4.0]},  # per-item losses in item order (reference MIA)
        "answer_scoring": "tofu",
    }
    assert math.isnan(reference_record(recs, {}, "forget01", {})["mia_auc"]["mia_loss_auc"])  # not computed: NaN
