"""Issue 26, item 1: the teacher-forced argmax flags (``argmax_match``) that exact memorization and extraction
strength are computed from, in the same forward pass as the answer log-probabilities (hf) and from vLLM's top-1
prompt log-probs."""

from types import SimpleNamespace

import pytest
import torch
from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM
from transformers import AutoModelForCausalLM, AutoTokenizer

from harness_ext.answer_logprobs import _is_top1
from harness_ext.request_types import ANSWER_LOGPROBS, install_request_types
from harness_ext.token_scoring import position_statistics
from unlearn_tasks.prompts import question_prompt


def test_argmax_match_flags_the_positions_whose_target_is_the_argmax():
    logits = torch.tensor([[0.0, 2.0, 1.0], [3.0, 1.0, 3.0], [0.0, 0.0, 5.0]])
    # argmax: 1, 0 (first of the tied maxima, as torch and open-unlearning take it), 2
    out = position_statistics(logits, torch.tensor([1, 2, 2]))
    assert out["argmax_match"].tolist() == [1.0, 0.0, 1.0]


def test_vllm_top1_from_the_rank_or_from_the_logprobs():
    lp = lambda v, rank=None: SimpleNamespace(logprob=v, rank=rank)  # noqa: E731
    assert _is_top1(5, {5: lp(-0.1, 1)}) == 1.0  # the chosen token is the top-1: one entry
    assert _is_top1(5, {5: lp(-2.0, 3), 7: lp(-0.5, 1)}) == 0.0
    assert _is_top1(5, {5: -2.0, 7: -0.5}) == 0.0 and _is_top1(7, {5: -2.0, 7: -0.5}) == 1.0  # plain floats


@pytest.fixture(scope="module")
def lm(tiny_model_dir):
    install_request_types()
    return HFLM(pretrained=str(tiny_model_dir), device="cpu", batch_size=2, dtype="float32")


def test_hf_flags_equal_a_direct_forward_pass_and_the_models_own_greedy_answer_matches(lm, tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    context = tok.encode(question_prompt("Where was Soren Brennan born?"))
    with torch.no_grad():
        greedy = model.generate(torch.tensor([context]), max_new_tokens=4, do_sample=False)[0, len(context):].tolist()
    other = (greedy[-1] + 1) % model.config.vocab_size
    answers = [greedy, greedy[:-1] + [other]]
    requests = [Instance(request_type=ANSWER_LOGPROBS, doc={}, idx=0,
                         arguments=("", "", {"context_ids": context, "continuation_ids": a})) for a in answers]
    out = getattr(lm, ANSWER_LOGPROBS)(requests)
    for answer, o in zip(answers, out):
        ids = context + answer + [lm.eot_token_id]
        with torch.no_grad():
            pred = model(torch.tensor([ids])).logits[0].argmax(-1)
        expected = [float(pred[t - 1].item() == ids[t]) for t in range(len(context), len(ids))]
        assert o["argmax_match"] == expected
    assert out[0]["argmax_match"][:4] == [1.0] * 4  # greedy decoding is the teacher-forced argmax
    assert out[1]["argmax_match"][3] == 0.0
