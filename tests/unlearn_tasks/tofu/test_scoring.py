"""Per-item scoring of one document from fabricated model outputs, against hand-computed values."""

import math

import pytest

from unlearn_tasks.tofu.options import TofuOptions
from unlearn_tasks.tofu.scoring import answer_texts, score_document


def _resp(*probs, mean=None, var=None):
    return {"logprobs": [math.log(p) for p in probs], "vocab_mean": mean, "vocab_var": var}


FORGET = {"split": "forget", "index": 3, "question": "Where was Soren born?", "answer": "Soren was born in Oslo.",
          "paraphrased_answer": "In Oslo.", "perturbed_answers": ["Soren was born in Lima.", "Soren was born in Rome."]}


def test_answer_texts_order():
    assert answer_texts(FORGET) == ["Soren was born in Oslo.", "In Oslo.", "Soren was born in Lima.", "Soren was born in Rome."]
    assert answer_texts({**FORGET, "split": "holdout"}) == ["Soren was born in Oslo."]
    assert answer_texts({**FORGET, "split": "ra"}) == ["Soren was born in Oslo.", "Soren was born in Lima.", "Soren was born in Rome."]


def test_forget_record_all_tokens():
    responses = [_resp(0.5, 0.5, mean=[-1.0, -1.0], var=[1.0, 1.0]), _resp(0.25), _resp(0.1), _resp(0.4)]
    rec = score_document(FORGET, "Soren was born in Oslo.", responses, TofuOptions())
    assert rec["rougeL_recall"] == pytest.approx(1.0)
    assert rec["prob"] == pytest.approx(0.5)
    # geometric truth ratio: sqrt(0.1 * 0.4) / 0.25 = 0.8
    assert rec["truth_ratio"] == pytest.approx(0.8)
    assert rec["mia_loss"] == pytest.approx(math.log(2))
    # min-k 0.4 of 2 tokens -> 1 token: -log(0.5)
    assert rec["mia_min_k"] == pytest.approx(math.log(2))
    # z = (log 0.5 + 1) / 1 for both -> score = -(log 0.5 + 1)
    assert rec["mia_min_k_plus_plus"] == pytest.approx(-(math.log(0.5) + 1))


def test_tofu_answer_scoring_skips_the_first_answer_token():
    responses = [_resp(0.01, 0.5, 0.5), _resp(0.9, 0.25), _resp(0.9, 0.1), _resp(0.9, 0.4)]
    rec = score_document(FORGET, None, responses, TofuOptions(answer_scoring="tofu"))
    assert rec["prob"] == pytest.approx(0.5)
    assert rec["truth_ratio"] == pytest.approx(0.8)
    assert math.isnan(rec["rougeL_recall"])
    assert math.isnan(rec["mia_min_k_plus_plus"])  # no vocabulary statistics (e.g. vLLM)


def test_real_authors_prob_is_normalised_over_options():
    doc = {**FORGET, "split": "ra", "paraphrased_answer": ""}
    rec = score_document(doc, "x", [_resp(0.6), _resp(0.3), _resp(0.1)], TofuOptions(truth_ratio_mean="arithmetic"))
    assert rec["prob"] == pytest.approx(0.6 / 1.0, rel=1e-6)
    assert rec["truth_ratio"] == pytest.approx(0.2 / 0.6)
    assert "mia_loss" not in rec


def test_options_are_validated():
    with pytest.raises(ValueError, match="answer_scoring must be one of"):
        TofuOptions.from_metadata({"answer_scoring": "first"})
    with pytest.raises(ValueError, match="forget_split must be one of"):
        TofuOptions.from_metadata({"forget_split": "forget20"})
