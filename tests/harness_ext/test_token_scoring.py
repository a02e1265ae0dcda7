"""Chunked per-token scoring (harness_ext.token_scoring) against the full-vocabulary log-softmax it replaces:
on random logits, on lm-eval's hf backend with the tiny model, and with a 128,256-token vocabulary."""

import pytest
import torch
import torch.nn.functional as F
from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM
from transformers import AutoTokenizer, LlamaForCausalLM

from harness_ext.answer_logprobs import encode_request
from harness_ext.request_types import ANSWER_LOGPROBS, install_request_types
from harness_ext.token_scoring import position_statistics, score_sequences
from unlearn_methods.scaffolding.tiny_model import tiny_llama_config
from unlearn_tasks.prompts import answer_continuation, question_prompt

QA = [
    ("Where was Soren Brennan born?", "Soren Brennan was born in Oslo."),
    ("What genre does Faye Quarrie write in?", "Faye Quarrie writes mystery."),
    ("Who wrote the play Hamlet?", "William Shakespeare"),
    ("Name a river.", "The Danube"),
    ("What is the capital of Norway?", "Oslo is the capital of Norway, a city on a fjord."),
]


def _full_vocabulary(logits, targets):
    """The previous implementation: float32 log-softmax over the whole vocabulary, then the statistics."""
    lp = F.log_softmax(logits.float(), dim=-1)
    p = lp.exp()
    mean = (p * lp).sum(-1)
    var = (p * lp * lp).sum(-1) - mean * mean
    return lp.gather(-1, targets[:, None]).squeeze(-1), mean, var.clamp_min(0)


def _exact_margins(logits, targets):
    z = logits.double()
    others = z.scatter(-1, targets[:, None], float("-inf")).logsumexp(-1)
    return z.gather(-1, targets[:, None]).squeeze(-1) - others


@pytest.mark.parametrize("vocab,dtype", [(50, torch.float32), (128_256, torch.float32), (128_256, torch.bfloat16)])
def test_position_statistics_equal_full_vocabulary(vocab, dtype):
    gen = torch.Generator().manual_seed(0)
    logits = (torch.randn(70, vocab, generator=gen) * 4).to(dtype)
    logits[3, 7] = 60.0  # one position where the chosen token has probability ~1
    targets = torch.randint(0, vocab, (70,), generator=gen)
    targets[3] = 7
    stats = position_statistics(logits, targets, chunk_elements=vocab * 16)  # 5 chunks
    chosen, mean, var = _full_vocabulary(logits, targets)
    torch.testing.assert_close(stats["logprobs"], chosen, rtol=0, atol=1e-5)
    torch.testing.assert_close(stats["vocab_mean"], mean, rtol=0, atol=1e-5)
    torch.testing.assert_close(stats["vocab_var"], var, rtol=0, atol=1e-5)
    torch.testing.assert_close(stats["margins"].double(), _exact_margins(logits, targets), rtol=0, atol=1e-4)
    assert stats["margins"][3] > 40  # not log(p/(1-p)) of a rounded p = 1, which would be inf


def test_chunk_size_does_not_change_results():
    gen = torch.Generator().manual_seed(1)
    logits, targets = torch.randn(33, 300, generator=gen), torch.randint(0, 300, (33,), generator=gen)
    one = position_statistics(logits, targets, chunk_elements=1)
    all_at_once = position_statistics(logits, targets, chunk_elements=10**9)
    for name in one:
        torch.testing.assert_close(one[name], all_at_once[name], rtol=0, atol=1e-6)


def test_score_sequences_splits_per_row():
    gen = torch.Generator().manual_seed(2)
    logits = torch.randn(2, 6, 11, generator=gen)
    spans, targets = [(2, 5), (1, 6)], [[1, 2, 3], [4, 5, 6, 7, 8]]
    for chunk_elements in (11, 22, 44, 10**6):  # one position per chunk, pieces of rows, rows grouped, all at once
        out = score_sequences(logits, spans, targets, chunk_elements=chunk_elements)
        assert [len(o["margins"]) for o in out] == [3, 5]
        for b, ((start, _), tgt) in enumerate(zip(spans, targets)):
            for k, t in enumerate(tgt):
                expected = F.log_softmax(logits[b, start + k], -1)[t].item()
                assert out[b]["logprobs"][k] == pytest.approx(expected, abs=1e-6)
    with pytest.raises(ValueError, match="targets"):
        score_sequences(logits, spans, [[1], [2]])


def _previous_hf_answer_logprobs(lm, requests):
    """The request type as it was before chunking (same batching): full float32 log-softmax of the batch."""
    encoded = []
    for req in requests:
        encoded.append(encode_request(lm, req))  # EOS appended
    order = sorted(range(len(encoded)), key=lambda i: -(len(encoded[i][0]) + len(encoded[i][1])))
    results = [None] * len(encoded)
    for start in range(0, len(order), lm.batch_size):
        idx = order[start : start + lm.batch_size]
        rows = [(encoded[i][0] + encoded[i][1])[-(lm.max_length + 1):][:-1] for i in idx]
        batch = torch.zeros((len(rows), max(len(r) for r in rows)), dtype=torch.long)
        for r, row in enumerate(rows):
            batch[r, : len(row)] = torch.tensor(row)
        logits = lm._model_call(batch)
        for r, i in enumerate(idx):
            n, end = min(len(encoded[i][1]), len(rows[r])), len(rows[r])
            cont = torch.tensor(encoded[i][1][-n:])
            chosen, mean, var = _full_vocabulary(logits[r, end - n : end], cont)
            results[i] = {"logprobs": chosen.tolist(), "vocab_mean": mean.tolist(), "vocab_var": var.tolist(),
                          "margins": _exact_margins(logits[r, end - n : end], cont).tolist()}
    return results


def _requests():
    return [Instance(request_type=ANSWER_LOGPROBS, doc={}, arguments=(question_prompt(q), answer_continuation(a)),
                     idx=0) for q, a in QA]


def _check_equal(lm):
    install_request_types()
    new = getattr(lm, ANSWER_LOGPROBS)(_requests())
    old = _previous_hf_answer_logprobs(lm, _requests())
    for n, o in zip(new, old):
        for name in ("logprobs", "vocab_mean", "margins"):
            # rel 2e-6: a float32 mean over 128k log-probs near -11.7 differs by ~1e-5 between torch builds (2.4.1)
            assert n[name] == pytest.approx(o[name], abs=1e-5, rel=2e-6), name
        # the variance E[lp^2] - E[lp]^2 cancels in float32: logits that differ in their last bits (ours come from
        # the output layer run on the scored positions only, a matrix product of another shape) move it by ~1e-3
        # of its value with a random 128k-vocabulary model on two threads; both terms are ~mean^2, each off by the
        # relative 2e-6 allowed for vocab_mean above (torch 2.4.1 against 2.13: 1.4e-4 at mean -11.7), hence the bound
        for v, w, m in zip(n["vocab_var"], o["vocab_var"], o["vocab_mean"]):
            assert v == pytest.approx(w, rel=2e-3, abs=1e-5 + 6e-6 * m * m), "vocab_var"


def test_hf_request_equals_previous_implementation_tiny_model(tiny_model_dir):
    _check_equal(HFLM(pretrained=str(tiny_model_dir), device="cpu", batch_size=3, dtype="float32"))


@pytest.fixture(scope="module")
def llama3_vocab_model_dir(tiny_model_dir, tmp_path_factory):
    """A random 1-layer Llama with Llama-3's 128,256-token vocabulary (the tiny tokenizer uses its first ids)."""
    out = tmp_path_factory.mktemp("vocab128k")
    torch.manual_seed(0)
    model = LlamaForCausalLM(tiny_llama_config(128_256, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                               num_attention_heads=1, num_key_value_heads=1, tie_word_embeddings=False))
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(out)
    return out


def test_hf_request_equals_previous_implementation_128k_vocabulary(llama3_vocab_model_dir):
    _check_equal(HFLM(pretrained=str(llama3_vocab_model_dir), device="cpu", batch_size=4, dtype="float32"))
