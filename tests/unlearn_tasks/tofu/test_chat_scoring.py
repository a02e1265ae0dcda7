"""Scoring open-unlearning's chat tokens (``answer_scoring: tofu`` under ``--apply_chat_template``): the backend
scored exactly its labels (``ou_labels``), so no answer token is hidden; the token-wise statistics (Min-K%,
Min-K%++, exact memorization, extraction strength) drop the last label as open-unlearning's do; LOSS keeps it; zlib
compresses the labels decoded. Hand-computed values."""

import math
import zlib

import pytest

from unlearn_tasks.tofu.options import TofuOptions
from unlearn_tasks.tofu.scoring import hides_first, mia_token_stats, score_document, scored_tokens

TOFU = TofuOptions(answer_scoring="tofu")
#: 'Soren' ' was' ' born' ' in' ' Oslo.' <|eot_id|> (the template's end of turn, which is Llama-3's EOS)
LPS = [-3.0, -0.5, -0.2, -0.1, -2.0, -4.0]


def _response(**extra):
    return {"logprobs": LPS, "vocab_mean": [-1.0] * 6, "vocab_var": [4.0] * 6, "argmax_match": [1, 1, 0, 1, 1, 1],
            "decoded_tail": "Soren was born in Oslo.", "ou_labels": True, **extra}


def test_no_token_hidden_only_the_last_dropped_from_token_wise_statistics():
    resp = _response()
    assert hides_first(resp, "tofu") is False and hides_first({"logprobs": LPS}, "tofu") is True
    assert scored_tokens(resp, "tofu") == LPS
    assert mia_token_stats(resp, "tofu")[0] == LPS[:-1]
    assert scored_tokens(resp, "all") == LPS and mia_token_stats(resp, "all")[0] == LPS


def test_holdout_item_mia_scores_by_hand():
    doc = {"split": "holdout", "index": 0, "question": "Where was Soren born?", "answer": "Soren was born in Oslo."}
    rec = score_document(doc, None, [_response()], TOFU)
    assert rec["mia_loss"] == pytest.approx(9.8 / 6)  # every label, the EOS included
    assert rec["mia_zlib"] == pytest.approx(9.8 / 6 / len(zlib.compress(b"Soren was born in Oslo.")))
    # Min-K% (k 0.4) over the 5 labels before the last: the 2 lowest, -3.0 and -2.0
    assert rec["mia_min_k"] == pytest.approx(2.5)
    # Min-K%++: z = (lp + 1) / 2 over the same 5; the 2 lowest, -1.0 and -0.5
    assert rec["mia_min_k_plus_plus"] == pytest.approx(0.75)


def test_forget_item_probability_and_memorization_by_hand():
    doc = {"split": "forget", "index": 0, "question": "Where was Soren born?", "answer": "Soren was born in Oslo.",
           "paraphrased_answer": "Oslo is where Soren was born.", "perturbed_answers": ["Soren was born in Rome."]}
    para, pert = [-1.0, -1.0], [-2.0, -4.0]
    responses = [_response(), {"logprobs": para, "ou_labels": True}, {"logprobs": pert, "ou_labels": True}]
    rec = score_document(doc, None, responses, TOFU)
    assert rec["prob"] == pytest.approx(math.exp(-9.8 / 6))
    assert rec["truth_ratio"] == pytest.approx(math.exp(-3.0) / math.exp(-1.0))  # p_wrong / p_correct
    # flags over the 5 labels before the last: [1, 1, 0, 1, 1]: EM 4/5; the matching suffix starts at 3: ES 1 - 3/5
    assert rec["exact_memorization"] == pytest.approx(0.8)
    assert rec["extraction_strength"] == pytest.approx(0.4)
