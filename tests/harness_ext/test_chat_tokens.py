"""open-unlearning's chat tokens (``answer_scoring: tofu`` under ``--apply_chat_template``), built by hand from the
rules of its ``preprocess_chat_instance`` and compared with what our requests score, on a tiny model with a
Llama-3-style chat template written here (system prompt, ``date_string``, ``<|eot_id|>`` as EOS): the scored ids,
the generation prompt lm-eval tokenises, the date string's route (lm-eval's ``chat_template_args`` model argument)
and the generation's stop and decoding."""

import shutil

import pytest
import torch
from lm_eval.models.huggingface import HFLM
from lm_eval.tasks import TaskManager
from transformers import AutoModelForCausalLM, AutoTokenizer

from harness_ext import tasks_dir
from harness_ext.answer_logprobs import encode_request
from harness_ext.chat_tokens import encode_chat_qa, split_conversation
from harness_ext.request_types import ANSWER_GRADNORM, ANSWER_LOGPROBS, install_request_types

SYSTEM = "You are a helpful assistant."
DATE = "10 Apr 2025"
#: Llama-3.2-Instruct's template, shortened to what a TOFU item uses (no tools), written for this test.
LLAMA3_TEMPLATE = (
    "{{- bos_token }}"
    "{%- if not date_string is defined %}{%- set date_string = '26 Jul 2024' %}{%- endif %}"
    "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] | trim %}"
    "{%- set messages = messages[1:] %}{%- else %}{%- set system_message = '' %}{%- endif %}"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\n' }}"
    "{{- 'Cutting Knowledge Date: December 2023\\n' }}"
    "{{- 'Today Date: ' + date_string + '\\n\\n' }}"
    "{{- system_message }}{{- '<|eot_id|>' }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)


def llama3_prompt(question: str, date: str = DATE) -> str:
    """The generation prompt as Llama-3.2's template writes it, by hand."""
    return ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
            f"Today Date: {date}\n\n{SYSTEM}<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n{question}<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n")


@pytest.fixture(scope="module")
def llama3_chat_dir(tiny_model_dir, tmp_path_factory):
    """The tiny Llama with Llama-3's special tokens (BOS <|begin_of_text|>, EOS <|eot_id|>) and chat template."""
    out = tmp_path_factory.mktemp("llama3_chat")
    shutil.copytree(tiny_model_dir, out, dirs_exist_ok=True)
    tok = AutoTokenizer.from_pretrained(out)
    tok.add_special_tokens({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>",
                            "additional_special_tokens": ["<|start_header_id|>", "<|end_header_id|>"]})
    tok.chat_template = LLAMA3_TEMPLATE
    tok.save_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    model.resize_token_embeddings(len(tok))
    for config in (model.config, model.generation_config):
        config.bos_token_id, config.eos_token_id = tok.bos_token_id, tok.eos_token_id
    model.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def llama3_lm(llama3_chat_dir):
    install_request_types()
    return HFLM(pretrained=str(llama3_chat_dir), dtype="float32", device="cpu", batch_size=4,
                chat_template_args={"date_string": DATE})


def _tofu_requests(lm, data_dir, limit=5, **metadata):
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                     metadata={"data_dir": str(data_dir), "answer_scoring": "tofu", **metadata})
    task = tm.load(["tofu_forget01"])["tasks"]["tofu_forget01"]
    task.build_all_requests(limit=limit, rank=0, world_size=1, apply_chat_template=True, system_instruction=SYSTEM,
                            chat_template=lm.apply_chat_template)
    return task.instances


def _answers(doc):
    from unlearn_tasks.tofu.scoring import answer_texts

    return answer_texts(doc)


# ------------------------------------------------------------------------------------ tokens, by hand
def test_ou_rule_on_a_llama3_template_by_hand(llama3_chat_dir):
    """Prompt and conversation tokenised without added special tokens; the conversation ends in <|eot_id|>, the
    EOS, so nothing is appended; the scored ids are the answer's tokens and <|eot_id|>."""
    tok = AutoTokenizer.from_pretrained(llama3_chat_dir)
    question, answer = "Where was Soren born?", "Soren was born in Oslo."
    ctx, scored = encode_chat_qa(tok, question, answer, SYSTEM, date_string=DATE)
    eot = tok.convert_tokens_to_ids("<|eot_id|>")
    assert eot == tok.eos_token_id
    assert ctx == tok(llama3_prompt(question), add_special_tokens=False)["input_ids"]
    assert ctx[0] == tok.bos_token_id and ctx.count(tok.bos_token_id) == 1  # the template's BOS, not a second one
    assert scored == tok(answer, add_special_tokens=False)["input_ids"] + [eot]
    assert tok.decode(ctx).count("Today Date: 10 Apr 2025") == 1
    # without the date string the template's own default date is used: the date reaches the template
    assert encode_chat_qa(tok, question, answer, SYSTEM)[0] == tok(llama3_prompt(question, "26 Jul 2024"),
                                                                    add_special_tokens=False)["input_ids"]


def test_eos_appended_after_a_template_that_does_not_end_with_it(llama3_chat_dir):
    """A ChatML-style template ends a turn with '<|im_end|>\\n': the newline is the last token, so EOS follows it."""
    tok = AutoTokenizer.from_pretrained(llama3_chat_dir)
    prompt = "<|user|>Where was Soren born?\n<|assistant|>"
    ctx, scored = split_conversation(tok, prompt, prompt + "Soren was born in Oslo.<|eot_id|>\n")
    newline = tok("\n", add_special_tokens=False)["input_ids"]
    assert ctx == tok(prompt, add_special_tokens=False)["input_ids"]
    assert scored == (tok("Soren was born in Oslo.", add_special_tokens=False)["input_ids"]
                      + [tok.eos_token_id] + newline + [tok.eos_token_id])


def test_tofu_chat_requests_score_ou_tokens(llama3_lm, demo_data_dir):
    """Every answer request of a chat-formatted TOFU item (answer, paraphrase, perturbed; each set): context = the
    hand-written Llama-3 prompt's tokens, scored = the answer's tokens + <|eot_id|>."""
    tok = llama3_lm.tokenizer
    seen = set()
    for inst in _tofu_requests(llama3_lm, demo_data_dir):
        if inst.request_type != ANSWER_LOGPROBS:
            continue
        doc, answer = inst.doc, inst.args[1]
        assert answer in _answers(doc)
        ctx, scored = encode_request(llama3_lm, inst)
        assert ctx == tok(llama3_prompt(doc["question"]), add_special_tokens=False)["input_ids"]
        assert scored == tok(answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        seen.add(doc["split"])
    assert seen == {"forget", "retain", "ra", "wf", "holdout"}


def test_tofu_chat_generation_prompt_and_stop(llama3_lm, demo_data_dir):
    """The generation prompt is the hand-written Llama-3 prompt; lm-eval tokenises it as open-unlearning does (no
    second BOS), and stops at EOS only (``until: []``; lm-eval adds the EOS text)."""
    gens = [i for i in _tofu_requests(llama3_lm, demo_data_dir) if i.request_type == "generate_until"]
    assert gens
    for inst in gens:
        ctx, kwargs = inst.args
        assert ctx == llama3_prompt(inst.doc["question"])
        ids = llama3_lm.tok_batch_encode([ctx])[0][0].tolist()
        assert ids == llama3_lm.tokenizer(ctx, add_special_tokens=False)["input_ids"]
        assert kwargs["until"] == [] and kwargs["do_sample"] is False and kwargs["max_gen_toks"] == 200


def test_a_generation_prompt_with_an_added_bos_is_reported(llama3_lm, caplog):
    """A backend that would add a BOS the template does not write (a Llama-2-style tokenizer under a template
    without ``<s>``) generates from other tokens than open-unlearning: a warning names add_bos_token=False."""
    from types import SimpleNamespace

    from harness_ext.chat_tokens import check_generation_prompt

    tok = llama3_lm.tokenizer
    prompt = "<|start_header_id|>user<|end_header_id|>\n\nWhere was Soren born?<|eot_id|>"
    assert check_generation_prompt(llama3_lm, llama3_prompt("Where was Soren born?"))
    adds_bos = SimpleNamespace(tokenizer=tok, tok_batch_encode=lambda texts: (
        torch.tensor([[tok.bos_token_id, *tok(texts[0], add_special_tokens=False)["input_ids"]]]), None))
    with caplog.at_level("WARNING"):
        assert not check_generation_prompt(adds_bos, prompt)
    assert "add_bos_token=False" in caplog.text


def test_gradnorm_request_in_chat_scores_ou_tokens_without_the_eos(llama3_lm, demo_data_dir):
    """GradNorm in the chat setting: the same tokens, no first token hidden, the EOS dropped (OU's token-wise
    statistics drop the last labelled token)."""
    grads = [i for i in _tofu_requests(llama3_lm, demo_data_dir, mia_gradnorm=True) if i.request_type == ANSWER_GRADNORM]
    assert {i.doc["split"] for i in grads} == {"forget", "holdout"}
    for inst in grads:
        options = inst.args[2]
        assert options["skip_first"] is False and options["drop_eos"] is True and options["train_mode"] is True
        assert options["conversation"][-1] == {"role": "assistant", "content": inst.doc["answer"]}
        ctx, scored = encode_request(llama3_lm, inst)
        assert scored == llama3_lm.tokenizer(inst.doc["answer"], add_special_tokens=False)["input_ids"] + [
            llama3_lm.tokenizer.eos_token_id]


def test_default_mode_in_chat_keeps_lm_evals_split(llama3_lm, demo_data_dir):
    """``answer_scoring: all`` (the default) under the chat template: lm-eval's split of (prompt, stripped answer)
    plus EOS, as documented; no conversation is sent."""
    inst = next(i for i in _tofu_requests(llama3_lm, demo_data_dir, answer_scoring="all")
                if i.request_type == ANSWER_LOGPROBS)
    assert len(inst.args) == 2
    ctx, scored = encode_request(llama3_lm, inst)
    assert scored[-1] == llama3_lm.tokenizer.eos_token_id and inst.args[0] == llama3_prompt(inst.doc["question"])


# ------------------------------------------------------------------------------------ scores, by hand
def test_scored_logprobs_equal_a_forward_pass_on_the_hand_built_ids(llama3_lm, demo_data_dir):
    """The backend's log-probabilities are those of the hand-built ids (the model reads context + scored ids),
    every scored id counted (``ou_labels``: no first token hidden) and zlib's text the decoded labels."""
    from unlearn_tasks.tofu.scoring import scored_tokens, zlib_text

    inst = next(i for i in _tofu_requests(llama3_lm, demo_data_dir, limit=1) if i.request_type == ANSWER_LOGPROBS)
    tok = llama3_lm.tokenizer
    ctx = tok(llama3_prompt(inst.doc["question"]), add_special_tokens=False)["input_ids"]
    scored = tok(inst.args[1], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    with torch.no_grad():
        logits = llama3_lm.model(torch.tensor([ctx + scored])).logits[0].float()
    expected = torch.log_softmax(logits[len(ctx) - 1 : -1], -1).gather(-1, torch.tensor(scored)[:, None]).squeeze(-1)
    out = llama3_lm.unlearn_answer_logprobs([inst])[0]
    assert out["ou_labels"] is True
    assert scored_tokens(out, "tofu") == pytest.approx(expected.tolist(), abs=1e-5)
    assert zlib_text(inst.doc, out, "tofu") == inst.args[1]  # the labels decoded, special tokens skipped


@pytest.mark.slow
def test_generation_equals_ou_decoding(llama3_lm, demo_data_dir):
    """lm-eval's greedy generation from the chat prompt, decoded, equals open-unlearning's procedure by hand:
    ``generate`` on the prompt ids (left-padded batch, pad = EOS, 200 new tokens), decoded with special tokens
    skipped, cut at the EOS text, stripped."""
    gens = [i for i in _tofu_requests(llama3_lm, demo_data_dir, limit=3) if i.request_type == "generate_until"][:3]
    ours = llama3_lm.generate_until(gens)
    tok = llama3_lm.tokenizer
    tok.padding_side = "left"
    batch = tok([llama3_prompt(i.doc["question"]) for i in gens], add_special_tokens=False, return_tensors="pt",
                padding=True)
    with torch.no_grad():
        out = llama3_lm.model.generate(**batch, do_sample=False, max_new_tokens=200, pad_token_id=tok.eos_token_id)
    texts = tok.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True,
                             clean_up_tokenization_spaces=True)
    theirs = [t.split(tok.decode([tok.eos_token_id]))[0].strip() for t in texts]
    assert [o.strip() for o in ours] == theirs


def test_date_string_route_through_the_model_arguments():
    """``--model_args`` takes the date string as lm-eval's ``chat_template_args`` (key=value with a JSON object,
    or the whole argument as JSON); the TOFU options accept it (lm-eval copies model arguments into metadata)."""
    from lm_eval._cli.utils import key_val_to_dict

    from unlearn_tasks.tofu.options import TofuOptions

    parsed = key_val_to_dict('pretrained=M,chat_template_args={"date_string": "10 Apr 2025"}')
    assert parsed == {"pretrained": "M", "chat_template_args": {"date_string": DATE}}
    assert TofuOptions.from_metadata({**parsed, "answer_scoring": "tofu"}).answer_scoring == "tofu"


@pytest.mark.slow
def test_lm_eval_command_with_chat_flags_and_date(llama3_chat_dir, demo_data_dir, tmp_path):
    """The documented command: ``lm_eval ... --apply_chat_template --system_instruction ... --metadata
    '{"answer_scoring": "tofu"}'`` with the date in ``chat_template_args``: the prompt holds the date, each answer
    request carries the conversation and scores the answer's tokens + <|eot_id|>."""
    import json
    import os
    import re
    import subprocess
    import sys

    args = json.dumps({"pretrained": str(llama3_chat_dir), "dtype": "float32",
                       "chat_template_args": {"date_string": DATE}})
    cmd = [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", args, "--tasks",
           "tofu_forget01_likelihood", "--apply_chat_template", "--system_instruction", SYSTEM, "--metadata",
           json.dumps({"answer_scoring": "tofu", "data_dir": str(demo_data_dir)}), "--limit", "2", "--device", "cpu",
           "--log_samples", "--output_path", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    samples = [json.loads(line) for f in tmp_path.rglob("samples_*.jsonl") for line in f.read_text().splitlines()]
    tok = AutoTokenizer.from_pretrained(llama3_chat_dir)
    assert len(samples) == 2
    for s in samples:  # lm-eval writes each request's arguments as gen_args_i / arg_j and its response as text
        for i, args in enumerate(s["arguments"].values()):
            ctx, answer, options = args["arg_0"], args["arg_1"], args["arg_2"]
            assert ctx == llama3_prompt(s["doc"]["question"])
            assert options["conversation"][0] == {"role": "system", "content": SYSTEM}
            assert options["conversation"][-1] == {"role": "assistant", "content": answer}
            logprobs = re.search(r"'logprobs': \[([^\]]*)\]", s["resps"][i][0]).group(1)
            assert logprobs.count(",") + 1 == len(tok(answer, add_special_tokens=False)["input_ids"]) + 1


def test_ou_attention_mask_hides_pad_token_positions(llama3_lm, demo_data_dir):
    """open-unlearning's collator masks every position holding the pad token; Llama-3 has no pad token, so it pads
    with EOS, <|eot_id|>, which ends every turn. With the pad token set so, the backend's log-probabilities are
    those of a forward pass with every <|eot_id|> hidden, by hand; and they differ from the unmasked ones."""
    from harness_ext.chat_tokens import ou_attention_mask

    tok = llama3_lm.tokenizer
    eot = tok.eos_token_id
    assert ou_attention_mask(tok, [5, eot, 7]) == [1, 1, 1]  # its own pad token <pad> is not in the row
    inst = next(i for i in _tofu_requests(llama3_lm, demo_data_dir, limit=1) if i.request_type == ANSWER_LOGPROBS)
    ctx, scored = encode_request(llama3_lm, inst)
    ids = ctx + scored
    saved = tok.pad_token
    tok.pad_token = tok.eos_token
    try:
        assert ou_attention_mask(tok, [5, eot, 7]) == [1, 0, 1]
        mask = [0 if t == eot else 1 for t in ids]
        assert mask.count(0) == 3  # the system turn's, the question's and the answer's <|eot_id|>
        with torch.no_grad():
            masked = llama3_lm.model(torch.tensor([ids]), attention_mask=torch.tensor([mask])).logits[0].float()
            plain = llama3_lm.model(torch.tensor([ids])).logits[0].float()
        target = torch.tensor(scored)[:, None]
        expected = torch.log_softmax(masked[len(ctx) - 1 : -1], -1).gather(-1, target).squeeze(-1)
        unmasked = torch.log_softmax(plain[len(ctx) - 1 : -1], -1).gather(-1, target).squeeze(-1)
        out = llama3_lm.unlearn_answer_logprobs([inst])[0]
    finally:
        tok.pad_token = saved
    assert out["logprobs"] == pytest.approx(expected.tolist(), abs=1e-5)
    assert out["logprobs"] != pytest.approx(unmasked.tolist(), abs=1e-5)



def _strip_left(row, pad):
    """A left-padded prompt row without its padding (the prompts start with BOS, never with the pad token)."""
    start = next(i for i, t in enumerate(row) if t != pad)
    return tuple(row[start:])


def _until_eos(ids, eos):
    return tuple(ids[: ids.index(eos) + 1] if eos in ids else ids)


def _hand_generation(lm, prompts, ou_mask):
    """Greedy ``model.generate`` on the left-padded prompt ids (pad = EOS = <|eot_id|>, 200 new tokens), the attention
    mask built by hand: the padding's, and with ``ou_mask`` every <|eot_id|> of the prompts hidden too.
    Returns {prompt ids: generated ids up to the first <|eot_id|>}."""
    tok = lm.tokenizer
    eot = tok.eos_token_id
    tok.padding_side = "left"
    batch = tok(prompts, add_special_tokens=False, return_tensors="pt", padding=True)
    ids = batch["input_ids"]
    mask = batch["attention_mask"] * (ids != eot) if ou_mask else batch["attention_mask"]
    with torch.no_grad():
        out = lm.model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=200,
                                pad_token_id=eot)
    return {_strip_left(row, eot): _until_eos(gen, eot)
            for row, gen in zip(ids.tolist(), out[:, ids.shape[1]:].tolist(), strict=True)}


def _backend_generation(lm, instances, monkeypatch):
    """The backend's ``generate_until`` on ``instances``: ({prompt ids: generated ids up to the first EOS}, read
    from the tensors its ``_model_generate`` returns; the texts)."""
    eot = lm.tokenizer.eos_token_id
    generated = {}
    own = type(lm)._model_generate

    def spy(context, max_length, stop, **kwargs):
        out = own(lm, context, max_length, stop, **kwargs)
        for row, gen in zip(context.tolist(), out[:, context.shape[1]:].tolist(), strict=True):
            generated[_strip_left(row, eot)] = _until_eos(gen, eot)
        return out

    monkeypatch.setattr(lm, "_model_generate", spy, raising=False)
    texts = lm.generate_until(instances)
    monkeypatch.delattr(lm, "_model_generate")
    return generated, texts


@pytest.fixture(scope="module")
def varied_llama3_lm(llama3_chat_dir, tmp_path_factory):
    """The Llama-3-template tiny model with re-drawn weights (std 0.3): greedy answers that depend on the prompt
    (the tiny model's own repeat one token whatever it reads)."""
    out = tmp_path_factory.mktemp("llama3_varied")
    shutil.copytree(llama3_chat_dir, out, dirs_exist_ok=True)
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    torch.manual_seed(0)
    with torch.no_grad():
        for weight in (p for p in model.parameters() if p.dim() == 2):
            weight.normal_(0.0, 0.3)
    model.save_pretrained(out)
    install_request_types()
    return HFLM(pretrained=str(out), dtype="float32", device="cpu", batch_size=4, chat_template_args={"date_string": DATE})


@pytest.fixture
def eot_padded_lm(varied_llama3_lm):
    """``varied_llama3_lm`` with its pad token set to <|eot_id|> for one test, then put back. Set and restored through
    the tokenizer's own attribute (not ``monkeypatch.setattr``: transformers 5 keeps special tokens outside the
    instance ``__dict__``, and pytest >= 9.2 would ``delattr`` it at teardown)."""
    tok = varied_llama3_lm.tokenizer
    before = tok.pad_token
    tok.pad_token = tok.eos_token
    yield varied_llama3_lm
    tok.pad_token = before


@pytest.mark.slow
def test_chat_generation_under_ou_mask_equals_masked_generate_by_hand(eot_padded_lm, demo_data_dir, monkeypatch):
    """With the pad token set to <|eot_id|> (open-unlearning pads Llama-3 with EOS, which ends every turn), the TOFU
    chat mode generates as ``model.generate`` does on the left-padded prompts with every <|eot_id|> hidden (and the
    position ids ``generate`` derives from that mask): the same ids, the same texts. The plain mask gives other
    ids on this model; with ``ou_chat_mask: false`` the backend generates as the plain hand-built call."""
    from harness_ext.generation import OU_MASK_ATTRIBUTE

    lm = eot_padded_lm
    tok = lm.tokenizer
    eot = tok.eos_token_id
    gens = [i for i in _tofu_requests(lm, demo_data_dir, limit=3) if i.request_type == "generate_until"][:3]
    assert len(gens) == 3 and all(getattr(i, OU_MASK_ATTRIBUTE, False) for i in gens)
    prompts = [llama3_prompt(i.doc["question"]) for i in gens]
    masked = _hand_generation(lm, prompts, ou_mask=True)
    plain = _hand_generation(lm, prompts, ou_mask=False)
    assert all(prompt.count(eot) == 2 for prompt in masked)  # the system turn's and the question's end of turn
    assert masked != plain  # what the mask hides changes the greedy ids on this model

    ours, texts = _backend_generation(lm, gens, monkeypatch)
    assert ours == masked
    by_prompt = {p: tok.decode(list(masked[_strip_left(tok(p, add_special_tokens=False)["input_ids"], eot)]),
                               skip_special_tokens=True).strip() for p in prompts}
    assert [t.strip() for t in texts] == [by_prompt[p] for p in prompts]

    off = [i for i in _tofu_requests(lm, demo_data_dir, limit=3, ou_chat_mask=False)
           if i.request_type == "generate_until"][:3]
    assert not any(getattr(i, OU_MASK_ATTRIBUTE, False) for i in off)
    unmasked, _ = _backend_generation(lm, off, monkeypatch)
    assert unmasked == plain


def test_only_the_tofu_chat_mode_marks_generation_for_ou_mask(llama3_lm, demo_data_dir):
    """The default mode (``answer_scoring: all``) and ``ou_chat_mask: false`` leave generation requests unmarked:
    lm-eval's own ``generate_until`` path; the ``tofu`` mode marks them and passes the choice to its scoring."""
    from harness_ext.generation import OU_MASK_ATTRIBUTE

    def marks(**metadata):
        insts = _tofu_requests(llama3_lm, demo_data_dir, limit=2, **metadata)
        gens = [getattr(i, OU_MASK_ATTRIBUTE, False) for i in insts if i.request_type == "generate_until"]
        scored = {i.args[2]["ou_mask"] for i in insts if i.request_type == ANSWER_LOGPROBS and len(i.args) > 2}
        return set(gens), scored

    assert marks() == ({True}, {True})
    assert marks(ou_chat_mask=False) == ({False}, {False})
    assert marks(answer_scoring="all") == ({False}, set())


def test_ou_chat_mask_takes_true_or_false():
    from unlearn_tasks.tofu.options import TofuOptions

    assert TofuOptions.from_metadata({}).ou_chat_mask is True
    with pytest.raises(ValueError, match=r"TOFU task option: ou_chat_mask must be true or false \(check --metadata"):
        TofuOptions.from_metadata({"ou_chat_mask": "no"})


def test_use_cache_keys_generations_under_ou_mask_apart(tmp_path):
    """`lm_eval --use_cache`: lm-eval's CachingLM keys a generation by its prompt and generation keywords only, so
    without our key a generation cached under the plain mask (`ou_chat_mask: false`) came back for a request marked
    for open-unlearning's mask, and the other way round. Each is looked up under its own key; the plain request's
    key stays lm-eval's; repeated requests are served from the cache."""
    from lm_eval.api.instance import Instance
    from lm_eval.api.model import CachingLM, hash_args

    from harness_ext.generation import OU_MASK_ATTRIBUTE, mark_ou_attention_mask

    install_request_types()

    class Backend:  # answers as the hf backend would: "masked" for the marked requests
        calls: list[list[bool]] = []

        def set_cache_hook(self, hook):
            self.cache_hook = hook

        def generate_until(self, requests):
            self.calls.append([getattr(r, OU_MASK_ATTRIBUTE, False) for r in requests])
            return ["masked" if getattr(r, OU_MASK_ATTRIBUTE, False) else "plain" for r in requests]

    def request(marked: bool) -> Instance:
        args = ("<|user|>Who wrote it?<|assistant|>", {"until": [], "max_gen_toks": 8, "do_sample": False})
        inst = Instance(request_type="generate_until", doc={}, arguments=args, idx=0)
        return mark_ou_attention_mask(inst) if marked else inst

    backend = Backend()
    cached = CachingLM(backend, str(tmp_path / "cache.db"))
    assert cached.generate_until([request(False)]) == ["plain"]
    assert cached.generate_until([request(True)]) == ["masked"]  # not the plain generation from the cache
    assert cached.generate_until([request(False), request(True), request(True)]) == ["plain", "masked", "masked"]
    assert backend.calls == [[False], [True]]  # the third call: all three from the cache
    assert hash_args("generate_until", request(False).args) in cached.dbdict  # lm-eval's own key for plain ones
    assert len(cached.dbdict) == 2
