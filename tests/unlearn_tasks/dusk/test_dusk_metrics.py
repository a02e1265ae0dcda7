"""DUSK's measures on hand-computed values: ROUGE, word LCS, Levenshtein, the release's Min-K%++ and AUROC
convention, privleak and retain deviation, and each measure's aggregation."""

import math

import pytest

from unlearn_tasks.dusk import scoring
from unlearn_tasks.dusk.benchmark import BENCHMARK


def test_rouge_scores_unstemmed_f1_and_recall():
    # reference 3 words, generation 2 of them in order: recall 2/3, precision 1, F1 = 2*(2/3)/(5/3) = 0.8
    s = scoring.rouge("the cat sat", "the cat")
    assert s == pytest.approx({"rougeL": 0.8, "rougeL_recall": 2 / 3, "rouge1": 0.8, "rouge1_recall": 2 / 3})
    # no stemming: "sits" does not match "sat" nor "sitting" "sit"
    assert scoring.rouge("sitting", "sit")["rougeL_recall"] == 0.0
    # order matters for ROUGE-L only: "b a" vs "a b": ROUGE-1 recall 1, ROUGE-L recall 1/2
    s = scoring.rouge("a b", "b a")
    assert (s["rouge1_recall"], s["rougeL_recall"]) == (1.0, 0.5)


def test_word_lcs_and_levenshtein():
    assert scoring.word_lcs("a b c d", "a x c d") == 3
    assert scoring.word_lcs("a b", "") == 0
    assert scoring.levenshtein("kitten", "sitting") == 3  # k->s, e->i, +g
    assert scoring.levenshtein("", "abc") == 3 and scoring.levenshtein("same", "same") == 0


def test_generation_records_cut_qa_answers_at_the_stop_strings_only():
    qa = scoring.generation_record("forget_qa", "Tarnby", "Tarnby\n\nQuestion: where?")
    assert qa["generation"] == "Tarnby" and qa["rougeL"] == 1.0 and "lcs" not in qa
    verbatim = scoring.generation_record("verbatim", "was born in 1961", "was born\n\nQuestion: in 1961")
    assert verbatim["generation"] == "was born\n\nQuestion: in 1961"  # continuations are never cut
    assert verbatim["lcs"] == 4 and verbatim["rougeL_recall"] == 1.0  # every reference word, in order


def test_min_k_plus_plus_is_the_release_formula():
    lps, mu, var = [-1.0, -2.0, -3.0, -4.0, -5.0], [-1.0] * 5, [4.0] * 5
    # z = (lp - mu) / (sqrt(var) + 1e-6) = [0, -1, -2, -3, -4] / 2.000001; k = 0.4: the lowest int(5 * 0.4) = 2
    assert scoring.min_k_plus_plus(lps, mu, var, 0.4) == pytest.approx((-4 - 3) / 2 / 2.000001, rel=1e-12)
    assert scoring.min_k_plus_plus(lps, mu, var, 0.3) == pytest.approx(-4 / 2.000001, rel=1e-12)  # int(1.5) = 1
    assert scoring.min_k_plus_plus(lps, mu, var, 0.1) == pytest.approx(-4 / 2.000001, rel=1e-12)  # at least one
    assert scoring.min_k_plus_plus(lps, mu, var, 1.0) == pytest.approx(-2 / 2.000001, rel=1e-12)
    assert math.isnan(scoring.min_k_plus_plus([], [], []))


def test_auroc_privleak_and_retain_deviation():
    # positives (label 1) above negatives (label 0) in 3 of the 4 pairs
    assert scoring.auroc([0.1, 0.4], [0.35, 0.8]) == pytest.approx(0.75)
    assert scoring.auroc([1.0], [1.0]) == pytest.approx(0.5)
    assert math.isnan(scoring.auroc([], [1.0])) and math.isnan(scoring.auroc([float("nan")], [1.0]))
    assert scoring.privleak(0.3, 0.5) == pytest.approx(-40.0)
    assert scoring.privleak(0.6, 0.5) == pytest.approx(20.0)
    assert scoring.retain_deviation(0.4, 0.5) == pytest.approx(20.0)
    assert scoring.retain_deviation(0.6, 0.5) == pytest.approx(20.0)
    assert math.isnan(scoring.privleak(0.3, float("nan")))


def _passage(set_name, index, score):
    return {"set": f"privacy_{set_name}", "index": index, "min_k_plus_plus": score}


def test_privacy_metrics_from_passage_scores():
    records = [_passage("forget", 0, -0.5), _passage("forget", 1, -1.0),  # members: high scores
               _passage("holdout", 0, -2.0), _passage("holdout", 1, -0.8),
               _passage("retain", 0, -0.6), _passage("retain", 1, -3.0), _passage("retain", 2, -0.1)]
    out = scoring.compute_metrics("privacy", records, {"auc_forget_holdout": 0.5, "auc_holdout_retain": 0.8})
    # forget (0) vs holdout (1): holdout -0.8 beats forget -1.0 only: 1 of 4 pairs
    assert out["auc_forget_holdout"] == pytest.approx(0.25)
    # holdout (0) vs retain (1): -0.6 beats -2 and -0.8; -3 beats none; -0.1 beats both: 4 of 6
    assert out["auc_holdout_retain"] == pytest.approx(4 / 6)
    assert out["privleak"] == pytest.approx((0.25 - 0.5) / 0.5 * 100)
    assert out["retain_deviation"] == pytest.approx(abs(4 / 6 - 0.8) / 0.8 * 100)
    assert list(out) == list(scoring.PRIVACY)
    no_ref = scoring.compute_metrics("privacy", records, None)
    assert math.isnan(no_ref["privleak"]) and math.isnan(no_ref["retain_deviation"])


def test_generation_measures_are_means_over_items():
    records = [scoring.generation_record("verbatim", "a b c d", "a b c d"),
               scoring.generation_record("verbatim", "a b c d", "x y")]
    out = scoring.compute_metrics("verbatim", records, None)
    assert out["verbatim_rougeL"] == pytest.approx(0.5) and out["verbatim_rougeL_recall"] == pytest.approx(0.5)
    assert out["verbatim_lcs"] == pytest.approx(2.0)  # (4 + 0) / 2
    assert out["verbatim_levenshtein"] == pytest.approx((0 + 6) / 2)  # "a b c d" -> "x y": a->x, b->y, " c d" deleted
    assert list(out) == scoring.metric_names("verbatim")
    qa = scoring.compute_metrics("shared_qa", [scoring.generation_record("shared_qa", "Quillmere University",
                                                                          "Quillmere")], None)
    assert qa == pytest.approx({"shared_rougeL": 2 / 3, "shared_rougeL_recall": 0.5, "shared_rouge1": 2 / 3,
                                "shared_rouge1_recall": 0.5})


def test_every_metric_has_a_direction_and_the_report_rows_exist():
    names = {m for s in ("verbatim", "forget_qa", "shared_qa", "retain_qa", "privacy") for m in scoring.metric_names(s)}
    assert {m for m, _ in BENCHMARK.rows} <= names
    assert BENCHMARK.lower_is_better <= names
    assert {"verbatim_rougeL", "unique_forget_rougeL", "privleak", "retain_deviation"} <= BENCHMARK.lower_is_better
    assert not {"shared_rougeL", "unique_retain_rougeL", "verbatim_levenshtein"} & BENCHMARK.lower_is_better
