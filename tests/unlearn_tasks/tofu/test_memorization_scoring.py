"""Issue 26, item 1: exact memorization and extraction strength of the forget answers in the TOFU task's records and
metrics, in both answer-scoring modes (hand-computed from argmax flags)."""

import math

import pytest

from unlearn_tasks.tofu.aggregate import compute_metrics, metric_names
from unlearn_tasks.tofu.options import TofuOptions
from unlearn_tasks.tofu.scoring import memorization, score_document


def _response(flags):
    return {"logprobs": [-0.1] * len(flags), "vocab_mean": None, "vocab_var": None, "argmax_match": flags}


def test_default_mode_scores_every_answer_token_and_the_eos():
    # flags over (4 answer tokens + EOS): right, wrong, right, right, right -> EM 4/5; suffix from k = 2: ES 1 - 2/5
    assert memorization(_response([1, 0, 1, 1, 1]), "all") == pytest.approx((0.8, 0.6))
    # last (EOS) wrong: no suffix matches -> ES 0 by the definition
    assert memorization(_response([1, 1, 0]), "all") == pytest.approx((2 / 3, 0.0))


def test_tofu_mode_drops_the_first_token_and_the_eos_as_open_unlearning():
    # scored window = positions 1..3 of [x, 0, 1, 1, eos]: 0, 1, 1 -> EM 2/3, ES 1 - 1/3
    assert memorization(_response([0, 0, 1, 1, 0]), "tofu") == pytest.approx((2 / 3, 2 / 3))
    # window 1, 0: no suffix matches -> open-unlearning's 1 / n = 1/2
    assert memorization(_response([1, 1, 0, 1]), "tofu") == pytest.approx((0.5, 0.5))
    # a one-token answer leaves nothing: EM None (left out of the mean), ES 0 (open-unlearning's)
    assert memorization(_response([1, 1]), "tofu") == (None, 0.0)
    assert memorization({"logprobs": [-0.1]}, "tofu") is None  # a backend without flags


def test_forget_records_carry_them_and_the_task_averages_them():
    opts = TofuOptions.from_metadata({"answer_scoring": "tofu"})
    doc = {"split": "forget", "index": 0, "question": "q", "answer": "a", "paraphrased_answer": "p",
           "perturbed_answers": ["w"]}
    responses = [_response([0, 1, 1, 0]), _response([1, 1]), _response([1, 1])]
    record = score_document(doc, None, responses, opts)
    assert record["exact_memorization"] == pytest.approx(1.0) and record["extraction_strength"] == pytest.approx(1.0)
    retain = score_document({**doc, "split": "retain"}, None, responses, opts)
    assert "extraction_strength" not in retain  # forget set only, as open-unlearning
    records = [record, {"split": "forget", "index": 1, "exact_memorization": None, "extraction_strength": 0.0},
               {"split": "forget", "index": 2, "exact_memorization": 0.5, "extraction_strength": 0.5}]
    m = compute_metrics(records, None)
    assert m["exact_memorization"] == pytest.approx(0.75)  # (1 + 0.5) / 2, None left out
    assert m["extraction_strength"] == pytest.approx(0.5)  # (1 + 0 + 0.5) / 3
    assert {"extraction_strength", "exact_memorization"} <= set(metric_names(["likelihood"]))
    assert math.isnan(compute_metrics([{"split": "forget", "index": 0}], None)["extraction_strength"])
