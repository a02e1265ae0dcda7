"""Parity mode against the release's own procedures, token by token: the cloze blank tokenised on its own (with a
Llama-style and a GPT-2-style tokenizer), comprehension QA generated to the release's budget under the model's own
generation config, and the release's comprehension-QA logs rescored."""

from __future__ import annotations

import csv

import pytest
import torch
from lm_eval.api.instance import Instance
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

from harness_ext.request_types import ANSWER_LOGPROBS, GENERATE_TOKENS, install_request_types
from unlearn_tasks.relu import prompts
from unlearn_tasks.relu.docs import _cloze_docs, release_ids
from unlearn_tasks.relu.release_logs import comprehension_score, read_comprehension_log

CHARS = "abcdefghijklmnopqrstuvwxyzHAQ:? \n"


def _char_tokenizer(bos: bool) -> PreTrainedTokenizerFast:
    """A byte-level tokenizer with one token per character (so ids can be worked out by hand); ``bos`` adds
    ``<s>`` in front of every encoding, as Llama's tokenizer does (GPT-2's adds nothing)."""
    vocab = {"<s>": 0, "</s>": 1}
    for ch in CHARS:
        vocab.setdefault(pre_tokenizers.ByteLevel(add_prefix_space=False).pre_tokenize_str(ch)[0][0], len(vocab))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    if bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")


def _ids(tokenizer, text: str) -> list[int]:
    """By hand: one id per character (the byte-level symbol of the character)."""
    vocab = tokenizer.get_vocab()
    return [vocab[pre_tokenizers.ByteLevel(add_prefix_space=False).pre_tokenize_str(ch)[0][0]] for ch in text]


RECORD = {"question": "who is he?", "answer": "...", "mask": "he is the [MASK]", "blanks": ["queen"]}


@pytest.mark.parametrize("style", ["llama", "gpt2"])
def test_cloze_parity_tokenises_prompt_and_blank_each_on_its_own(style):
    tok = _char_tokenizer(bos=style == "llama")
    (doc,) = _cloze_docs("forget10", "forget10", [RECORD], tok)
    prompt = "Question: who is he?\nAnswer: he is the "
    assert doc["prompt"] == prompt == prompts.cloze_prompt(RECORD["question"], RECORD["mask"])
    bos = [0] if style == "llama" else []
    # the prompt's trailing space stays its own token at the end of the context; the blank has no leading space
    assert doc["context_ids"] == bos + _ids(tok, prompt) and doc["context_ids"][-1] == _ids(tok, " ")[0]
    assert doc["target_ids"] == bos + _ids(tok, "queen")  # Llama-style: BOS again, in the middle (as the release)
    assert release_ids(tok, "queen") == doc["target_ids"]


def test_default_cloze_docs_carry_no_ids():
    (doc,) = _cloze_docs("forget10", "forget10", [RECORD])
    assert doc["context_ids"] == [] and doc["target_ids"] == []


@pytest.fixture(scope="module")
def hflm(tiny_model_dir):
    from lm_eval.models.huggingface import HFLM

    install_request_types()
    return HFLM(pretrained=str(tiny_model_dir), device="cpu", batch_size=2, dtype="float32")


def _request(kind: str, args: tuple) -> Instance:
    return Instance(request_type=kind, doc={}, arguments=args, idx=0)


def test_given_ids_are_scored_exactly_without_eos(hflm, tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    cases = [([5, 9, 14, 3], [7, 2, 11]), ([4, 4], [1, 30, 31, 6])]  # the second scores a BOS/EOS-like id mid-answer
    reqs = [_request(ANSWER_LOGPROBS, ("ignored", "ignored", {"context_ids": c, "continuation_ids": t,
                                                              "append_eos": False})) for c, t in cases]
    got = hflm.unlearn_answer_logprobs(reqs)
    for (ctx, cont), out in zip(cases, got, strict=True):
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ctx + cont[:-1]])).logits[0].float(), -1)
        expected = [logp[len(ctx) - 1 + i, t].item() for i, t in enumerate(cont)]
        assert out["logprobs"] == pytest.approx(expected, abs=1e-5)


def _release_generate(model, tokenizer, ids: list[int], n: int) -> str:
    """The release's procedure, one prompt at a time: ``model.generate`` with the model's generation config and
    ``max_new_tokens`` = the budget, then ``tokenizer.decode`` (special tokens kept)."""
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), pad_token_id=tokenizer.eos_token_id, max_new_tokens=n, do_sample=False)
    return tokenizer.decode(out[0, len(ids):])


@pytest.mark.parametrize("stops_at_eos", [True, False], ids=["eos-in-generation-config", "no-eos"])
def test_generation_to_the_budget_equals_the_release_procedure(hflm, tiny_model_dir, stops_at_eos):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    eos = tokenizer.eos_token_id
    with torch.no_grad():  # make EOS the likely next token after token 7, so generations reach it
        model.lm_head.weight[eos] += 3.0 * model.get_input_embeddings().weight[7] / model.get_input_embeddings().weight[7].norm()
    model.generation_config.eos_token_id = eos if stops_at_eos else None
    hflm._model = model
    prompts_ids = [[5, 9, 7], [12, 7, 7, 40, 7], [3]]  # different lengths: left padding in one batch
    budgets = [6, 9, 4]
    reqs = [_request(GENERATE_TOKENS, ("ignored", {"context_ids": ids, "max_new_tokens": n}))
            for ids, n in zip(prompts_ids, budgets, strict=True)]
    got = hflm.unlearn_generate_tokens(reqs)
    expected = [_release_generate(model, tokenizer, ids, n) for ids, n in zip(prompts_ids, budgets, strict=True)]
    assert got == expected
    texts_with_eos = [t for t in got if tokenizer.eos_token in t]
    assert texts_with_eos, "the fixture should make generations reach EOS"
    if stops_at_eos:  # generation ends at EOS, the EOS itself decoded as text (special tokens kept)
        assert all(t.endswith(tokenizer.eos_token) for t in texts_with_eos)
    else:  # the budget is spent whatever EOS does
        assert [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in got] == budgets


def _write_release_log(path, rows):
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["prompt", "prediction", "target"])
        for prompt, prediction, target in rows:  # the release stores newlines as the two characters \n
            writer.writerow([prompt.replace("\n", "\\n"), prediction.replace("\n", "\\n"), target])


def test_release_comprehension_log_is_rescored_as_the_release_scored_it(tmp_path):
    path = tmp_path / "forget05_prompts_new.---model.csv"
    _write_release_log(path, [
        ("Context: c\nQuestion: q1\nAnswer:", " the cat sat<|endoftext|>\n\nIt", "the cat sat"),
        ("Context: c\nQuestion: q2\nAnswer:", " a b", "a b"),
    ])
    assert "\\n\\nIt" in path.read_text()  # the layout: escaped newlines
    pairs = read_comprehension_log(path)
    assert pairs[0] == (" the cat sat<|endoftext|>\n\nIt", "the cat sat")
    # row 1 by hand: prediction tokens the/cat/sat/endoftext/it, target the/cat/sat.
    # ROUGE-1 F = 2*(3/5)*1/(3/5+1) = 0.75; ROUGE-2 F = 2*(2/4)*1/(2/4+1) = 2/3; ROUGE-L F = 0.75. Row 2: 1, 1, 1.
    row1 = (0.75 + 2 / 3 + 0.75) / 3
    assert comprehension_score(pairs) == pytest.approx((row1 + 1.0) / 2)
    # kept escaped, "\\n\\nIt" would read as the tokens "n" and "nit": the release's number needs the newlines back
    escaped = [(p.replace("\n", "\\n"), t) for p, t in pairs]
    assert comprehension_score(escaped) != pytest.approx(comprehension_score(pairs))


def test_a_file_without_the_release_columns_is_named(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="other.csv: not a ReLU comprehension-QA log"):
        read_comprehension_log(path)
