"""The ``unlearn_answer_logprobs`` request on lm-eval's hf backend, checked against a direct forward pass,
lm-eval's own loglikelihood, and TOFU/open-unlearning's answer-boundary rule."""

import pytest
import torch
from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM
from transformers import AutoModelForCausalLM, AutoTokenizer

from harness_ext.request_types import ANSWER_LOGPROBS, install_request_types
from unlearn_tasks.prompts import answer_continuation, question_prompt
from unlearn_tasks.tofu.scoring import scored_tokens

QA = [
    ("Where was Soren Brennan born?", "Soren Brennan was born in Oslo."),
    ("What genre does Faye Quarrie write in?", "Faye Quarrie writes mystery."),
    ("Who wrote the play Hamlet?", "William Shakespeare"),
]


@pytest.fixture(scope="module")
def lm(tiny_model_dir):
    install_request_types()
    return HFLM(pretrained=str(tiny_model_dir), device="cpu", batch_size=2, dtype="float32")


def _requests(pairs):
    return [Instance(request_type=ANSWER_LOGPROBS, doc={}, arguments=(question_prompt(q), answer_continuation(a)), idx=0)
            for q, a in pairs]


def _direct(model, ids, start):
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
    return [logp[t - 1, ids[t]].item() for t in range(start, len(ids))], logp


def test_matches_lm_eval_loglikelihood_plus_eos(lm):
    out = getattr(lm, ANSWER_LOGPROBS)(_requests(QA))
    lls = lm.loglikelihood(
        [Instance(request_type="loglikelihood", doc={}, arguments=(question_prompt(q), answer_continuation(a)), idx=0)
         for q, a in QA]
    )
    for o, (ll, _) in zip(out, lls):
        assert sum(o["logprobs"][:-1]) == pytest.approx(ll, abs=1e-4)  # the last token is the appended EOS


def test_matches_direct_forward_and_vocab_statistics(lm, tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    out = getattr(lm, ANSWER_LOGPROBS)(_requests(QA))
    for (q, a), o in zip(QA, out):
        prompt = question_prompt(q)
        ids = tok.encode(prompt + answer_continuation(a)) + [tok.eos_token_id]
        start = len(tok.encode(prompt))
        expected, logp = _direct(model, ids, start)
        assert o["logprobs"] == pytest.approx(expected, abs=1e-4)
        rows = logp[start - 1 : len(ids) - 1]
        mean = (rows.exp() * rows).sum(-1)
        assert o["vocab_mean"] == pytest.approx(mean.tolist(), abs=1e-4)
        var = (rows.exp() * rows * rows).sum(-1) - mean**2
        assert o["vocab_var"] == pytest.approx(var.tolist(), abs=1e-4)


def test_tofu_scoring_equals_tofu_label_masking(lm, tiny_model_dir):
    """TOFU: tokenize 'Question: q\\nAnswer: ' alone (n tokens), mask the first n positions of the joint
    'Question: q\\nAnswer: a' + EOS. With a byte-level BPE tokenizer this drops the first answer token."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    out = getattr(lm, ANSWER_LOGPROBS)(_requests(QA))
    for (q, a), o in zip(QA, out):
        tofu_prompt = f"Question: {q}\nAnswer: "
        ids = tok.encode(tofu_prompt + a) + [tok.eos_token_id]
        n = len(tok.encode(tofu_prompt))
        expected, _ = _direct(model, ids, n)
        assert scored_tokens(o, "tofu") == pytest.approx(expected, abs=1e-4)
        assert len(scored_tokens(o, "all")) == len(expected) + 1


def test_own_tokens_score_a_text_as_the_models_loss_on_it(lm, tiny_model_dir):
    """``own_tokens``: the text's own ids, the first unscored, so minus the mean log-prob is ``model(ids,
    labels=ids).loss`` (LUME's MIA loss)."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    texts = [a for _, a in QA]
    out = getattr(lm, ANSWER_LOGPROBS)([Instance(request_type=ANSWER_LOGPROBS, doc={}, arguments=(
        "", t, {"append_eos": False, "own_tokens": True}), idx=0) for t in texts])
    for text, o in zip(texts, out):
        ids = tok(text, return_tensors="pt").input_ids
        assert len(o["logprobs"]) == ids.shape[1] - 1
        with torch.no_grad():
            loss = model(ids, labels=ids).loss.item()
        assert -sum(o["logprobs"]) / len(o["logprobs"]) == pytest.approx(loss, abs=1e-4)


def test_batch_size_does_not_change_scores(tiny_model_dir):
    install_request_types()
    one = HFLM(pretrained=str(tiny_model_dir), device="cpu", batch_size=1, dtype="float32")
    many = HFLM(pretrained=str(tiny_model_dir), device="cpu", batch_size=3, dtype="float32")
    a = getattr(one, ANSWER_LOGPROBS)(_requests(QA))
    b = getattr(many, ANSWER_LOGPROBS)(_requests(QA))
    for x, y in zip(a, b):
        assert x["logprobs"] == pytest.approx(y["logprobs"], abs=1e-4)


def test_unsupported_backend_gets_a_clear_error():
    from lm_eval.models.dummy import DummyLM

    install_request_types()
    with pytest.raises(NotImplementedError, match="'hf' and 'vllm' backends"):
        getattr(DummyLM(), ANSWER_LOGPROBS)(_requests(QA[:1]))
