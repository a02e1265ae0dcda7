"""CLEAR metrics against hand-computed values, in the default (per-item) and the release-parity mode."""

from __future__ import annotations

import math

import pytest

from unlearn_tasks.clear import scoring
from unlearn_tasks.clear.documents import SETS
from unlearn_tasks.metrics.clear import release_truth_ratios
from unlearn_tasks.tofu.aggregate import ReferenceData

E = math.exp


def _resp(*lps):
    return {"logprobs": list(lps), "vocab_mean": None, "vocab_var": None}


def test_release_truth_ratio_pools_the_perturbed_loss_over_the_set():
    # pooled perturbed mean log-prob = (-2 - 3 - 4) / 3 = -3
    got = release_truth_ratios([-1.0, -2.0], [[-2.0, -3.0], [-4.0]])
    assert got == pytest.approx([E(-3 + 1), E(-3 + 2)])


def test_caption_record():
    doc = {"split": "forget_caption", "index": 0, "answer": "Ann has red hair.", "paraphrased": "p", "perturbed": ["a", "b"]}
    responses = [_resp(-1.0, -1.0), _resp(-0.5), _resp(-2.0), _resp(-3.0)]
    r = scoring.score_document(doc, "Ann has red hair.", responses, "all", "geometric")
    assert r["rougeL_recall"] == 1.0
    assert r["prob"] == pytest.approx(E(-1.0))
    assert r["truth_ratio"] == pytest.approx(E(-2.5 + 0.5))  # geometric mean of the perturbed over the paraphrase
    arithmetic = scoring.score_document(doc, None, responses, "all", "arithmetic")["truth_ratio"]
    assert arithmetic == pytest.approx((E(-2) + E(-3)) / 2 / E(-0.5))
    assert math.isnan(scoring.score_document(doc, None, responses, "all", "geometric")["rougeL_recall"])


def test_name_record_uses_the_answer_as_paraphrase_and_normalises_over_the_options():
    doc = {"split": "real_faces", "index": 3, "answer": "Ann Lee", "paraphrased": "Ann Lee", "perturbed": ["Bo", "Cy"]}
    r = scoring.score_document(doc, "Bo", [_resp(-1.0), _resp(-2.0), _resp(-3.0)], "all", "geometric")
    assert r["prob"] == pytest.approx(E(-1) / (E(-1) + E(-2) + E(-3)), rel=1e-8)
    assert r["truth_ratio"] == pytest.approx(E(-2.5 + 1.0))
    assert r["rougeL_recall"] == 0.0
    assert scoring.answer_texts(doc) == ["Ann Lee", "Bo", "Cy"]


def test_tofu_answer_scoring_skips_the_first_token():
    doc = {"split": "retain_caption", "index": 0, "answer": "x", "paraphrased": "y", "perturbed": ["z"]}
    r = scoring.score_document(doc, None, [_resp(-9.0, -1.0), _resp(-9.0, -2.0), _resp(-9.0, -4.0)], "tofu", "geometric")
    assert r["prob"] == pytest.approx(E(-1.0))
    assert r["truth_ratio"] == pytest.approx(E(-4.0 + 2.0))


def _records():
    """Two items per set: (rouge, answer lp, paraphrase lp, perturbed lps); caption sets carry a paraphrase."""
    data = {
        "forget_caption": [(1.0, -1.0, -1.0, [-2.0]), (0.5, -2.0, -2.0, [-1.0])],
        "forget_facerec": [(1.0, -1.0, -1.0, [-1.0]), (0.0, -1.0, -1.0, [-3.0])],
        "retain_caption": [(0.5, -1.0, -0.5, [-1.5]), (1.0, -1.0, -1.0, [-3.0])],
        "retain_facerec": [(1.0, -1.0, -1.0, [-2.0]), (1.0, -2.0, -2.0, [-2.0])],
        "real_faces": [(1.0, -1.0, -1.0, [-2.0, -2.0]), (0.0, -1.0, -1.0, [-1.0, -3.0])],
        "real_world": [(0.5, -1.0, -1.0, [-2.0]), (0.5, -1.0, -1.0, [-2.0])],
    }
    records = []
    for split, items in data.items():
        for i, (rouge, ans, para, pert) in enumerate(items):
            doc = {"split": split, "index": i, "answer": "a", "paraphrased": "a", "perturbed": ["p"] * len(pert)}
            responses = [_resp(ans)] + ([_resp(para)] if split.endswith("caption") else []) + [_resp(v) for v in pert]
            rec = scoring.score_document(doc, None, responses, "all", "geometric")
            rec["rougeL_recall"] = rouge
            records.append(rec)
    return records


def test_corpus_metrics_default_mode_by_hand():
    m = scoring.compute_metrics(_records(), "default", None)
    # forget caption: R = exp(-2+1)=e^-1 and exp(-1+2)=e -> min(R,1/R) = e^-1 both
    assert m["forget_caption_truth_ratio"] == pytest.approx(E(-1))
    assert m["forget_caption_prob"] == pytest.approx((E(-1) + E(-2)) / 2)
    assert m["forget_caption_rougeL_recall"] == pytest.approx(0.75)
    # forget facerec: R = 1 and e^-2 -> (1 + e^-2) / 2; prob p/(p + p_pert)
    assert m["forget_facerec_truth_ratio"] == pytest.approx((1 + E(-2)) / 2)
    assert m["forget_facerec_prob"] == pytest.approx((0.5 + E(-1) / (E(-1) + E(-3))) / 2)
    # retain caption: R = exp(-1.5+0.5)=e^-1 and e^-2 -> mean(1 - R)
    assert m["retain_caption_truth_ratio"] == pytest.approx(((1 - E(-1)) + (1 - E(-2))) / 2)
    assert m["retain_facerec_truth_ratio"] == pytest.approx(((1 - E(-1)) + 0.0) / 2)
    assert m["real_faces_truth_ratio"] == pytest.approx(((1 - E(-1)) + (1 - E(-1))) / 2)
    assert m["real_faces_prob"] == pytest.approx((E(-1) / (E(-1) + 2 * E(-2)) + E(-1) / (2 * E(-1) + E(-3))) / 2)
    utility = [m[f"{s}_{k}"] for s in ("retain_caption", "retain_facerec", "real_faces", "real_world")
               for k in ("prob", "rougeL_recall", "truth_ratio")]
    assert m["model_utility"] == pytest.approx(len(utility) / sum(1 / v for v in utility))
    real = [m[f"{s}_{k}"] for s in ("real_faces", "real_world") for k in ("prob", "rougeL_recall", "truth_ratio")]
    assert min(real) > 0
    assert m["real_score"] == pytest.approx(len(real) / sum(1 / v for v in real))
    assert math.isnan(m["forget_quality"])


def test_corpus_metrics_parity_mode_by_hand():
    m = scoring.compute_metrics(_records(), "parity", None)
    # forget caption, pooled perturbed mean = (-2 - 1)/2 = -1.5: R = exp(-1.5+1), exp(-1.5+2)
    r = [E(-0.5), E(0.5)]
    assert m["forget_caption_truth_ratio"] == pytest.approx(sum(min(x, 1 / x) for x in r) / 2)
    # real_faces, pooled over 4 options = -2: R = e^-1 twice
    assert m["real_faces_truth_ratio"] == pytest.approx(1 - E(-1))
    # retain caption, pooled = -2.25: R = exp(-2.25+0.5), exp(-2.25+1)
    assert m["retain_caption_truth_ratio"] == pytest.approx(((1 - E(-1.75)) + (1 - E(-1.25))) / 2)
    # probabilities and ROUGE do not change with the mode
    assert m["forget_caption_prob"] == scoring.compute_metrics(_records(), "default", None)["forget_caption_prob"]


def test_forget_quality_is_the_ks_p_value_against_the_reference():
    from scipy.stats import ks_2samp

    records = _records()
    ours = scoring.set_truth_ratios(records, "forget_caption", "default")
    same = scoring.compute_metrics(records, "default", ReferenceData(list(ours)))
    assert same["forget_quality"] == pytest.approx(1.0)
    other = [0.01, 0.02, 0.03]
    m = scoring.compute_metrics(records, "default", ReferenceData(other))
    assert m["forget_quality"] == pytest.approx(ks_2samp(ours, other).pvalue)
    record = scoring.reference_record(records, "forget10", {"mode": "default"})
    assert record["format"] == scoring.REFERENCE_FORMAT and record["forget_truth_ratio"] == ours


def test_domain_scores_are_harmonic_means():
    records = _records()
    m = scoring.compute_metrics(records, "default", None)
    for name, sets in (("retain_score", ("retain_caption", "retain_facerec")), ("forget_score", ("forget_caption", "forget_facerec"))):
        values = [m[f"{s}_{k}"] for s in sets for k in ("prob", "rougeL_recall", "truth_ratio")]
        want = 0.0 if min(values) <= 0 else len(values) / sum(1 / v for v in values)
        assert m[name] == pytest.approx(want)
    assert set(scoring.metric_names(["generation", "likelihood"], list(SETS))) >= {"model_utility", "forget_quality"}


def test_every_corpus_number_by_hand():
    """All 18 set numbers written out, then the four harmonic means from those hand values (not from the output)."""
    odds = E(-1) / (E(-1) + E(-2))  # option-normalised prob of an answer at -1 against one option at -2
    hand = {
        "forget_caption": (E(-1), (E(-1) + E(-2)) / 2, 0.75),  # (truth ratio stat, prob, rouge)
        "forget_facerec": ((1 + E(-2)) / 2, (0.5 + E(-1) / (E(-1) + E(-3))) / 2, 0.5),
        "retain_caption": ((2 - E(-1) - E(-2)) / 2, E(-1), 0.75),
        "retain_facerec": ((1 - E(-1)) / 2, (odds + 0.5) / 2, 1.0),
        "real_faces": (1 - E(-1), (E(-1) / (E(-1) + 2 * E(-2)) + E(-1) / (2 * E(-1) + E(-3))) / 2, 0.5),
        "real_world": (1 - E(-1), odds, 0.5),
    }
    m = scoring.compute_metrics(_records(), "default", None)
    for s, (tr, prob, rouge) in hand.items():
        assert (m[f"{s}_truth_ratio"], m[f"{s}_prob"], m[f"{s}_rougeL_recall"]) == pytest.approx((tr, prob, rouge)), s

    def hmean(sets):
        values = [v for s in sets for v in hand[s]]
        assert len(values) == 3 * len(sets) and min(values) > 0  # none degenerate
        return len(values) / sum(1 / v for v in values)

    assert m["model_utility"] == pytest.approx(hmean(["retain_caption", "retain_facerec", "real_faces", "real_world"]))
    assert m["real_score"] == pytest.approx(hmean(["real_faces", "real_world"]))
    assert m["retain_score"] == pytest.approx(hmean(["retain_caption", "retain_facerec"]))
    assert m["forget_score"] == pytest.approx(hmean(["forget_caption", "forget_facerec"]))
