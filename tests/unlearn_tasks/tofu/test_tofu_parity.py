"""The TOFU-compatible mode (``answer_scoring: tofu``) against open-unlearning's behaviour: the tokens its
membership-inference attacks score, and the exact generation prompt, token by token on a byte-level BPE and a
SentencePiece-style tokenizer. Default-mode behaviour is checked beside it."""

import zlib

import pytest
import torch
from lm_eval.api.instance import Instance
from lm_eval.models.huggingface import HFLM
from lm_eval.tasks import TaskManager
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoModelForCausalLM, AutoTokenizer

from harness_ext import tasks_dir
from harness_ext.request_types import ANSWER_LOGPROBS, install_request_types
from unlearn_tasks.metrics import mia
from unlearn_tasks.prompts import answer_continuation, question_prompt, tofu_generation_prompt
from unlearn_tasks.tofu.options import TofuOptions
from unlearn_tasks.tofu.scoring import mia_token_stats, score_document, scored_tokens, zlib_text

HOLDOUT = {"split": "holdout", "index": 0, "question": "Where was Soren born?", "answer": "Soren was born in Oslo."}


# ----------------------------------------------------------------------------------------- MIA token set
def test_mia_token_set_hand_built():
    """Answer tokens [' Soren', ' was', ' born', ' in', ' Oslo', '.', EOS] with chosen log-probs.

    Default: every token, EOS included, in every attack. TOFU-compatible (open-unlearning): the first answer token
    is hidden by the prompt boundary; Min-K% / Min-K%++ also drop the EOS; LOSS / zlib keep it (their average loss
    is taken over all labelled tokens)."""
    lps = [-3.0, -0.5, -0.2, -0.1, -2.0, -0.3, -4.0]
    resp = {"logprobs": lps, "vocab_mean": [-1.0] * 7, "vocab_var": [4.0] * 7, "decoded_tail": " was born in Oslo."}

    assert mia_token_stats(resp, "all")[0] == lps
    assert mia_token_stats(resp, "tofu")[0] == [-0.5, -0.2, -0.1, -2.0, -0.3]
    assert scored_tokens(resp, "tofu") == [-0.5, -0.2, -0.1, -2.0, -0.3, -4.0]

    default = score_document(HOLDOUT, None, [resp], TofuOptions())
    # 40% of 7 -> 2 lowest: -4.0, -3.0
    assert default["mia_min_k"] == pytest.approx(3.5)
    assert default["mia_loss"] == pytest.approx(-sum(lps) / 7)
    tofu = score_document(HOLDOUT, None, [resp], TofuOptions(answer_scoring="tofu"))
    # 40% of 5 -> 2 lowest: -2.0, -0.5 (the EOS's -4.0 is not scored)
    assert tofu["mia_min_k"] == pytest.approx(1.25)
    # z = (lp + 1) / 2 over the same 5 tokens; lowest two: (-2+1)/2, (-0.5+1)/2
    assert tofu["mia_min_k_plus_plus"] == pytest.approx(-((-0.5) + 0.25) / 2)
    assert tofu["mia_loss"] == pytest.approx(-sum(lps[1:]) / 6)
    assert zlib_text(HOLDOUT, resp, "tofu") == " was born in Oslo."
    assert zlib_text(HOLDOUT, resp, "all") == HOLDOUT["answer"]
    assert tofu["mia_zlib"] == pytest.approx(tofu["mia_loss"] / len(zlib.compress(b" was born in Oslo.")))


def test_one_token_answer_leaves_no_mia_tokens_in_tofu_mode():
    """' Paris' + EOS: TOFU's boundary hides ' Paris', open-unlearning's MIA drops the EOS: nothing left, scored 0."""
    resp = {"logprobs": [-1.0, -2.0], "vocab_mean": [0.0, 0.0], "vocab_var": [1.0, 1.0]}
    rec = score_document({**HOLDOUT, "answer": "Paris"}, None, [resp], TofuOptions(answer_scoring="tofu"))
    assert rec["mia_min_k"] == 0.0 and rec["mia_min_k_plus_plus"] == 0.0
    assert rec["mia_loss"] == pytest.approx(2.0)  # the EOS alone


def test_min_k_plus_plus_variance_floor():
    # variance 1e-10: the exact z-score is huge; open-unlearning clamps the variance at 1e-6
    assert mia.min_k_plus_plus_score([-1.0], [-1.5], [1e-10], k=1.0) == pytest.approx(-0.5 / 1e-5)
    assert mia.min_k_plus_plus_score([-1.0], [-1.5], [1e-10], k=1.0, var_floor=1e-6) == pytest.approx(-0.5 / 1e-3)


@pytest.fixture(scope="module")
def lm(tiny_model_dir):
    install_request_types()
    return HFLM(pretrained=str(tiny_model_dir), device="cpu", batch_size=2, dtype="float32")


def test_mia_tokens_equal_open_unlearning_label_masking(lm, tiny_model_dir):
    """Rebuild open-unlearning's per-token MIA statistics by hand: prompt 'Question: q\\nAnswer: ' tokenized alone
    (n tokens) masks the first n positions of prompt + answer + EOS; the last labelled position (EOS) is dropped;
    the zlib text is the labelled tokens decoded with special tokens skipped."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    pairs = [("Where was Soren Brennan born?", "Soren Brennan was born in Oslo."),
             ("What genre does Faye Quarrie write in?", "Faye Quarrie writes mystery.")]
    requests = [Instance(request_type=ANSWER_LOGPROBS, doc={}, arguments=(question_prompt(q), answer_continuation(a)),
                         idx=0) for q, a in pairs]
    out = getattr(lm, ANSWER_LOGPROBS)(requests)
    for (q, a), resp in zip(pairs, out):
        prompt = f"Question: {q}\nAnswer: "
        ids = tok.encode(prompt + a) + [tok.eos_token_id]
        labels = [-100] * len(tok.encode(prompt)) + ids[len(tok.encode(prompt)):]
        labelled = [i for i, lab in enumerate(labels) if lab != -100][:-1]
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
        expected = [logp[t - 1, ids[t]].item() for t in labelled]
        rows = logp[[t - 1 for t in labelled]]
        mu = (rows.exp() * rows).sum(-1)
        var = (rows.exp() * rows * rows).sum(-1) - mu**2
        lps, vmean, vvar = mia_token_stats(resp, "tofu")
        assert lps == pytest.approx(expected, abs=1e-4)
        assert vmean == pytest.approx(mu.tolist(), abs=1e-4) and vvar == pytest.approx(var.tolist(), abs=1e-4)
        label_ids = [lab for lab in labels if lab != -100]
        assert resp["decoded_tail"] == tok.decode(label_ids, skip_special_tokens=True)
        k = max(1, int(0.4 * len(expected)))
        rec = score_document({**HOLDOUT, "answer": a}, None, [resp], TofuOptions(answer_scoring="tofu"))
        assert rec["mia_min_k"] == pytest.approx(-sum(sorted(expected)[:k]) / k, abs=1e-4)


# ----------------------------------------------------------------------------------------- generation prompt
def _generation_context(demo_data_dir, **metadata):
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                     metadata={"data_dir": str(demo_data_dir), **metadata})
    task = tm.load(["tofu_forget01_rouge"])["tasks"]["tofu_forget01_rouge"]
    task.build_all_requests(limit=1, rank=0, world_size=1)
    inst = next(i for i in task.instances if i.request_type == "generate_until")
    return inst.doc["question"], inst.args[0]


@pytest.mark.parametrize(("metadata", "suffix"), [
    ({}, "\nAnswer:"),
    ({"answer_scoring": "tofu"}, "\nAnswer: "),
    ({"answer_scoring": "all", "generation_prompt": "tofu"}, "\nAnswer: "),
    ({"answer_scoring": "tofu", "generation_prompt": "lm_eval"}, "\nAnswer:"),
])
def test_generation_prompt_per_mode(demo_data_dir, metadata, suffix):
    question, ctx = _generation_context(demo_data_dir, **metadata)
    assert ctx == f"Question: {question}" + suffix


def test_generation_prompt_option_is_validated():
    with pytest.raises(ValueError, match="generation_prompt must be one of"):
        TofuOptions.from_metadata({"generation_prompt": "legacy"})


TEXTS = ["Question: Where was Soren born?\nAnswer: Soren was born in Oslo.",
         "Question: What does Soren write?\nAnswer: Soren writes poetry."] * 50


def _byte_level_bpe() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(TEXTS, trainers.BpeTrainer(vocab_size=400, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def _sentencepiece_unigram() -> Tokenizer:
    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.train_from_iterator(TEXTS, trainers.UnigramTrainer(vocab_size=60, show_progress=False, unk_token="<unk>",
                                                           special_tokens=["<unk>"]))
    return tok


def test_tofu_prompt_tokens_byte_level_bpe():
    tok = _byte_level_bpe()
    prompt = question_prompt("Where was Soren born?")
    assert tok.encode(prompt).tokens == ["Question", ":", "ĠWhere", "Ġwas", "ĠSoren", "Ġborn", "?", "Ċ", "Answer", ":"]
    # TOFU's prompt: the trailing space is a token of its own, the last thing the model sees before generating
    assert tok.encode(tofu_generation_prompt(prompt)).tokens == tok.encode(prompt).tokens + ["Ġ"]
    # ... while in the scored text it merges into the first answer word (why TOFU's boundary hides that token)
    assert tok.encode(tofu_generation_prompt(prompt) + "Soren").tokens[-3:] == ["Answer", ":", "ĠSoren"]


def test_tofu_prompt_tokens_sentencepiece_style():
    tok = _sentencepiece_unigram()
    prompt = question_prompt("Where was Soren born?")
    plain, tofu = tok.encode(prompt).tokens, tok.encode(tofu_generation_prompt(prompt)).tokens
    assert "".join(plain) == "▁Question:▁Where▁was▁Soren▁born?\nAnswer:"
    assert tofu == plain + ["▁"]  # the trailing space becomes a lone "▁" piece
    assert tok.decode(tok.encode(tofu_generation_prompt(prompt)).ids) == tofu_generation_prompt(prompt)


def test_hf_backend_feeds_the_trailing_space_token(lm, demo_data_dir):
    """What lm-eval's hf backend encodes for generation in each mode (tiny byte-level BPE model)."""
    _, plain = _generation_context(demo_data_dir)
    _, tofu = _generation_context(demo_data_dir, answer_scoring="tofu")
    space = lm.tokenizer.convert_tokens_to_ids("Ġ")
    assert lm.tok_encode(tofu) == lm.tok_encode(plain) + [space]
