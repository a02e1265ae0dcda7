"""The lm-eval-internal facts of :mod:`harness_ext.lm_eval_patches` and the request types' dispatch to the vLLM path,
checked with stand-in classes (no vLLM needed): the class names and modules lm-eval 0.4.13 uses, the request-option
convention, and the vLLM answer log-probabilities and margins computed by hand."""

import math
import types

import pytest
from lm_eval.models.huggingface import HFLM

from harness_ext import answer_gradnorm, answer_logprobs, generate_tokens
from harness_ext.lm_eval_patches import (
    BACKENDS,
    drop_padding_responses,
    hf_batch_size,
    in_document_order,
    is_backend,
    request_options,
)
from harness_ext.request_types import (
    ANSWER_GRADNORM,
    ANSWER_LOGPROBS,
    GENERATE_TOKENS,
    REQUEST_TYPES,
    install_request_types,
)


def _stand_in(class_name: str, module: str, **attrs):
    """An instance of a class named like lm-eval's backend class, defined in ``module``."""
    return type(class_name, (), {"__module__": module, **attrs})()


def test_backends_are_recognised_by_class_name_and_module_including_subclasses():
    vllm = _stand_in("VLLM", "lm_eval.models.vllm_causallms")
    assert is_backend(vllm, "vllm") and not is_backend(vllm, "hf") and not is_backend(vllm, "vllm-vlm")
    assert not is_backend(_stand_in("VLLM", "somewhere.else"), "vllm")  # the name alone is not enough
    sub = type("MyHF", (HFLM,), {})
    assert is_backend(sub.__new__(sub), "hf")  # a subclass of lm-eval's HFLM is the hf backend
    assert set(BACKENDS) == {"hf", "vllm", "hf-multimodal", "vllm-vlm"}
    assert BACKENDS["hf"] == (HFLM.__name__, "lm_eval.models.huggingface")


def test_request_options_and_batch_size():
    req = types.SimpleNamespace(args=("ctx", "cont", {"append_eos": False}))
    assert request_options(req) == {"append_eos": False} and request_options(req, 1) == {}
    assert request_options(types.SimpleNamespace(args=("ctx", {"max_new_tokens": 3})), 1) == {"max_new_tokens": 3}
    assert request_options(types.SimpleNamespace(args=("ctx",))) == {}
    assert hf_batch_size(types.SimpleNamespace(batch_size=4)) == 4
    assert hf_batch_size(types.SimpleNamespace(batch_size="auto", max_batch_size=None)) == 16
    assert hf_batch_size(types.SimpleNamespace(batch_size="auto", max_batch_size=8)) == 8


@pytest.mark.parametrize(("n_docs", "world_size"), [(7, 2), (8, 2), (10, 3), (2, 4), (0, 2), (5, 1)])
def test_gathered_records_are_put_back_in_document_order(n_docs, world_size):
    """What the main process aggregates under a launcher: each process's documents as lm-eval's own iterator gives
    them (``Task.doc_iterator``'s ``create_iterator``), concatenated in rank order (``evaluate``'s gather)."""
    from lm_eval.utils import create_iterator

    docs = [f"doc{i}" for i in range(n_docs)]
    gathered = [doc for rank in range(world_size)
                for _, doc in create_iterator(enumerate(docs), rank=rank, limit=None, world_size=world_size)]
    assert sorted(gathered) == sorted(docs)
    assert in_document_order(gathered, world_size) == docs


def test_the_answers_to_padding_requests_are_dropped():
    """lm-eval's ``evaluate`` pads a process's requests with copies of its last request and appends their answers to
    that request: each request keeps its own ``repeats`` answers."""
    from lm_eval.api.instance import Instance

    sampled = Instance("generate_until", {}, ("ctx", {}), 0, metadata=("t", 3, 2))  # K = 2 generations
    once = Instance("loglikelihood", {}, ("ctx", " a"), 0, metadata=("t", 4, 1))
    cloned = [sampled] * 2 + [once] + [sampled] * 2 * 2  # two padding copies of the last (sampled) request
    for answer, req in zip(["g1", "g2", (-1.0, False), "pad1", "pad2", "pad3", "pad4"], cloned, strict=True):
        req.resps.append(answer)
    assert len(sampled.resps) == 6
    drop_padding_responses([sampled, once])
    assert sampled.resps == ["g1", "g2"] and once.resps == [(-1.0, False)]


def test_request_types_are_installed_on_lm_evals_base_class():
    from lm_eval.api.model import LM

    install_request_types()
    assert REQUEST_TYPES == {ANSWER_LOGPROBS: answer_logprobs.answer_logprobs,
                             GENERATE_TOKENS: generate_tokens.generate_tokens,
                             ANSWER_GRADNORM: answer_gradnorm.answer_gradnorm}
    assert getattr(LM, ANSWER_LOGPROBS) is answer_logprobs.answer_logprobs
    assert getattr(LM, GENERATE_TOKENS) is generate_tokens.generate_tokens
    assert getattr(LM, ANSWER_GRADNORM) is answer_gradnorm.answer_gradnorm


class _Tokenizer:
    def decode(self, ids, skip_special_tokens=True):
        return " ".join(str(i) for i in ids)


def test_vllm_answer_logprobs_reads_prompt_logprobs_and_derives_margins():
    """Context [5], continuation [7, 8] + EOS 2: the scored ids are 7, 8, 2; vLLM gives each chosen token's log-prob;
    the margin is log p - log(1 - p): p = 1/4 gives -log 3, p = 1/2 gives 0."""
    lps = {7: math.log(0.25), 8: math.log(0.5), 2: math.log(0.75)}
    seen = {}

    def model_generate(requests, generate):
        seen["requests"], seen["generate"] = requests, generate
        return [types.SimpleNamespace(prompt_logprobs=[None] + [{t: types.SimpleNamespace(logprob=lps[t])}
                                                                 for t in ids[1:]]) for ids in requests]

    lm = _stand_in("VLLM", "lm_eval.models.vllm_causallms", max_length=64, eot_token_id=2, prefix_token_id=1,
                   tokenizer=_Tokenizer(), _model_generate=staticmethod(model_generate))
    req = types.SimpleNamespace(args=("q", "a", {"context_ids": [5], "continuation_ids": [7, 8]}))
    (out,) = answer_logprobs.answer_logprobs(lm, [req])
    assert seen == {"requests": [[5, 7, 8, 2]], "generate": False}
    assert out["logprobs"] == pytest.approx([math.log(0.25), math.log(0.5), math.log(0.75)])
    assert out["margins"] == pytest.approx([-math.log(3), 0.0, math.log(3)])
    assert out["vocab_mean"] is None and out["vocab_var"] is None and out["decoded_tail"] == "8 2"


def test_generate_tokens_routes_vllm_and_refuses_other_backends(monkeypatch):
    calls = []
    monkeypatch.setattr(generate_tokens, "vllm_generate_tokens", lambda lm, reqs: calls.append(len(reqs)) or ["x"])
    vllm = _stand_in("VLLM", "lm_eval.models.vllm_causallms")
    assert generate_tokens.generate_tokens(vllm, [object()]) == ["x"] and calls == [1]
    with pytest.raises(NotImplementedError, match=r"'hf' and 'vllm' backends .*Other is neither"):
        generate_tokens.generate_tokens(_stand_in("Other", "x"), [])
