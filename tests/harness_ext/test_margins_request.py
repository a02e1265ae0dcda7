"""Per-token margins of the ``unlearn_answer_logprobs`` request on lm-eval's hf backend: equal to the margins
computed from a direct forward pass's logits, and to ``log p - log(1 - p)`` of the same tokens (vLLM's formula)."""

import numpy as np
import pytest
import torch
from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM
from transformers import AutoModelForCausalLM, AutoTokenizer

from harness_ext.request_types import ANSWER_LOGPROBS, install_request_types
from unlearn_tasks.metrics.klom import margins_from_logits, margins_from_logprobs
from unlearn_tasks.prompts import answer_continuation, question_prompt

QA = [
    ("Where was Soren Brennan born?", "Soren Brennan was born in Oslo."),
    ("Who wrote the play Hamlet?", "William Shakespeare"),
]


@pytest.fixture(scope="module")
def scored(tiny_model_dir):
    install_request_types()
    lm = HFLM(pretrained=str(tiny_model_dir), device="cpu", batch_size=2, dtype="float32")
    requests = [Instance(request_type=ANSWER_LOGPROBS, doc={}, arguments=(question_prompt(q), answer_continuation(a)),
                         idx=0) for q, a in QA]
    return getattr(lm, ANSWER_LOGPROBS)(requests)


def test_margins_match_a_direct_forward_pass(scored, tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    for (q, a), out in zip(QA, scored):
        prompt = question_prompt(q)
        ids = tok.encode(prompt + answer_continuation(a)) + [tok.eos_token_id]
        start = len(tok.encode(prompt))
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0].double().numpy()
        expected = margins_from_logits(logits[start - 1 : len(ids) - 1], np.array(ids[start:]))
        assert len(out["margins"]) == len(expected)
        assert out["margins"] == pytest.approx(expected.tolist(), abs=1e-4)


def test_margin_formulas_agree(scored):
    for out in scored:
        derived = margins_from_logprobs(out["logprobs"])
        assert out["margins"] == pytest.approx(derived.tolist(), abs=1e-4)


def _greedy_margins(tiny_model_dir, scale: float):
    """hf request margins of the scaled model's own greedy continuation, and the float64 margins of its logits."""
    install_request_types()
    lm = HFLM(pretrained=str(tiny_model_dir), device="cpu", batch_size=2, dtype="float32")
    with torch.no_grad():
        lm.model.lm_head.weight.mul_(scale)
    tok = lm.tokenizer
    prompt = question_prompt(QA[0][0])
    prompt_ids = tok.encode(prompt)
    generated = lm.model.generate(torch.tensor([prompt_ids]), max_new_tokens=8, do_sample=False)[0, len(prompt_ids):]
    continuation = tok.decode(generated)
    out = getattr(lm, ANSWER_LOGPROBS)([Instance(request_type=ANSWER_LOGPROBS, doc={}, arguments=(prompt, continuation),
                                                 idx=0)])[0]
    ids = tok.encode(prompt + continuation) + [tok.eos_token_id]
    with torch.no_grad():
        logits = lm.model(torch.tensor([ids])).logits[0].double().numpy()
    expected = margins_from_logits(logits[len(prompt_ids) - 1 : len(ids) - 1], np.array(ids[len(prompt_ids):]))
    return out, expected


def test_confident_tokens_keep_their_margin(tiny_model_dir):
    """Output weights scaled up, the model scores its own greedy tokens with p ~ 1: the hf margins equal the float64
    margins of the logits, while log p - log(1 - p) of a float32 log-prob saturates to +inf (why hf computes them
    from the logits)."""
    out, expected = _greedy_margins(tiny_model_dir, 20.0)
    assert expected[:-1].min() > 30  # confident greedy tokens; the last one is the appended EOS
    assert out["margins"] == pytest.approx(expected.tolist(), rel=1e-4, abs=1e-3)
    assert np.isinf(margins_from_logprobs(out["logprobs"])[:-1]).all()


def test_formulas_agree_for_moderate_probabilities(tiny_model_dir):
    out, expected = _greedy_margins(tiny_model_dir, 3.0)
    assert np.abs(expected[:-1]).max() < 5 and (expected[:-1] > 0).any()  # p around 1/2: both formulas are precise
    assert margins_from_logprobs(out["logprobs"]) == pytest.approx(expected.tolist(), abs=1e-4)
    assert out["margins"] == pytest.approx(expected.tolist(), abs=1e-4)
