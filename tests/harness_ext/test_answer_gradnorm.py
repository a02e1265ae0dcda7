"""Issue 26, item 2: the ``unlearn_answer_gradnorm`` request (GradNorm MIA) on the hf backend against an independent
backward pass; no gradients or training mode left behind; a clear error on other backends."""

import math

import pytest
import torch
from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM
from transformers import AutoModelForCausalLM, AutoTokenizer

from harness_ext.answer_gradnorm import answer_gradnorm
from harness_ext.request_types import ANSWER_GRADNORM, install_request_types
from unlearn_tasks.prompts import answer_continuation, question_prompt

Q, A = "Where was Soren Brennan born?", "Soren Brennan was born in Oslo."


@pytest.fixture(scope="module")
def lm(tiny_model_dir):
    install_request_types()
    return HFLM(pretrained=str(tiny_model_dir), device="cpu", batch_size=2, dtype="float32")


def _expected(tiny_model_dir, skip_first, drop_eos, p=2.0):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    prompt = question_prompt(Q)
    ids = tok.encode(prompt + answer_continuation(A)) + [tok.eos_token_id]
    start = len(tok.encode(prompt))
    logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
    lps = torch.stack([logp[t - 1, ids[t]] for t in range(start, len(ids))])
    lps = lps[(1 if skip_first else 0):(len(lps) - 1 if drop_eos else len(lps))]
    (-lps.mean()).backward()
    return torch.stack([q.grad.norm(p=p) for q in model.parameters() if q.grad is not None]).mean().item()


@pytest.mark.parametrize("skip_first, drop_eos", [(False, False), (True, True)])
def test_equals_an_independent_backward_pass(lm, tiny_model_dir, skip_first, drop_eos):
    options = {"skip_first": skip_first, "drop_eos": drop_eos}
    req = Instance(request_type=ANSWER_GRADNORM, doc={}, idx=0,
                   arguments=(question_prompt(Q), answer_continuation(A), options))
    (value,) = getattr(lm, ANSWER_GRADNORM)([req])
    assert value == pytest.approx(_expected(tiny_model_dir, skip_first, drop_eos), rel=1e-4)


@pytest.mark.parametrize("start_training", [False, True])
def test_no_gradients_and_the_mode_restored_and_train_mode_only_when_asked(lm, start_training):
    seen = []
    hook = lm.model.register_forward_pre_hook(lambda module, args: seen.append(module.training))
    lm.model.train(start_training)
    try:
        for train_mode in (False, True):
            req = Instance(request_type=ANSWER_GRADNORM, doc={}, idx=0,
                           arguments=(question_prompt(Q), answer_continuation(A), {"train_mode": train_mode}))
            getattr(lm, ANSWER_GRADNORM)([req])
            assert seen[-1] is train_mode
            assert lm.model.training is start_training
            assert all(q.grad is None for q in lm.model.parameters())
    finally:
        hook.remove()
        lm.model.eval()


def test_nothing_left_to_score_is_nan(lm):
    req = Instance(request_type=ANSWER_GRADNORM, doc={}, idx=0, arguments=("", "", {"continuation_ids": [5],
                                                                               "skip_first": True, "drop_eos": True}))
    assert math.isnan(getattr(lm, ANSWER_GRADNORM)([req])[0])


def test_other_backends_get_a_clear_error():
    class VLLM:  # not lm-eval's hf class
        pass

    with pytest.raises(NotImplementedError, match="needs gradients .* 'hf' backend only; VLLM is not it"):
        answer_gradnorm(VLLM(), [])
