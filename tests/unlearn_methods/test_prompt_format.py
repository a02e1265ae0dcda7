"""`unlearn run --prompt-format`: QA pairs trained inside the chat template exactly as open-unlearning builds them
(its ``preprocess_chat_instance``), ``auto`` resolved from the tokenizer, the format saved, shown in the model card
with the matching lm_eval flags; the first logged forget NLL of a run equals the NLL of open-unlearning's tokens."""

import json
import math
import shutil
import sys
from pathlib import Path

import pytest
import torch
import yaml

from unlearn_methods.config import load_run_config
from unlearn_methods.prompt_format import PLAIN, PromptFormat, resolve_prompt_format
from unlearn_tasks.prompts import encode_chat_qa, encode_qa

#: A Llama-3-style template in plain-text markers (the tiny tokenizer has no header tokens): a system turn with the
#: knowledge-cutoff and date lines Llama-3.2's template writes, the date from ``date_string``.
LLAMA_STYLE = (
    "{{ bos_token }}{% for m in messages %}"
    "[{{ m['role'] }}]\n\n"
    "{% if m['role'] == 'system' %}Cutting Knowledge Date: December 2023\nToday Date: {{ date_string }}\n\n{% endif %}"
    "{{ m['content'] }}[eot]"
    "{% endfor %}{% if add_generation_prompt %}[assistant]\n\n{% endif %}"
)
#: A template that closes assistant turns with EOS itself (no EOS is appended then).
EOS_CLOSED = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}{% if m['role'] == 'assistant' %}{{ eos_token }}"
    "{% else %}{{ '\\n' }}{% endif %}{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"
)
SYSTEM = "You are a helpful assistant."
DATE = "10 Apr 2025"


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def _ids(tok, text):
    return tok.encode(text, add_special_tokens=False)


def test_chat_tokens_follow_the_template_with_system_prompt_and_date(tok):
    tok = _with_template(tok, LLAMA_STYLE)
    q, a = "Who wrote Lanterns of Ash?", "Mira Olsen wrote it."
    prompt = ("<s>[system]\n\nCutting Knowledge Date: December 2023\nToday Date: 10 Apr 2025\n\n"
              "You are a helpful assistant.[eot][user]\n\nWho wrote Lanterns of Ash?[eot][assistant]\n\n")
    ids, labels = encode_chat_qa(tok, q, a, SYSTEM, {"date_string": DATE})
    assert ids == _ids(tok, prompt + "Mira Olsen wrote it.[eot]") + [tok.eos_token_id]  # the template does not end with EOS: appended, as OU does
    n_prompt = len(_ids(tok, prompt))
    assert labels == [-100] * n_prompt + ids[n_prompt:]  # everything after the generation prompt, EOS included
    assert tok.decode(ids[n_prompt:-1]) == "Mira Olsen wrote it.[eot]"


def test_no_system_turn_without_a_system_prompt_and_no_second_eos(tok):
    tok = _with_template(tok, EOS_CLOSED)
    ids, labels = encode_chat_qa(tok, "Q?", "A.", None)
    assert ids == _ids(tok, "user: Q?\nassistant: A.</s>")  # EOS closes the turn: not appended again
    n_prompt = len(_ids(tok, "user: Q?\nassistant: "))
    assert labels[:n_prompt] == [-100] * n_prompt and labels[n_prompt:] == ids[n_prompt:]
    assert encode_chat_qa(tok, "Q?", "A.", "")[0] == ids  # an empty system prompt adds no turn (OU: `if system_prompt`)
    assert encode_chat_qa(tok, "Q?", "A.", None, max_length=4) == (ids[:4], labels[:4])


def test_open_unlearnings_own_preprocessing_gives_the_same_tokens(tok):
    """Side by side with OU's ``preprocess_chat_instance`` when a checkout is present (../open-unlearning or
    $OPEN_UNLEARNING_DIR); transformers 5 returns a dict from ``apply_chat_template(tokenize=True)``, so OU's
    function gets the token list it was written for."""
    import os

    checkout = Path(os.environ.get("OPEN_UNLEARNING_DIR", Path(__file__).resolve().parents[3] / "open-unlearning"))
    if not (checkout / "src" / "data" / "utils.py").is_file():
        pytest.skip("no open-unlearning checkout")
    import importlib.util

    spec = importlib.util.spec_from_file_location("ou_data_utils", checkout / "src" / "data" / "utils.py")
    ou = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ou)
    tok = _with_template(tok, LLAMA_STYLE)
    listed = _ListChatTokens(tok)
    for system, args in ((SYSTEM, {"date_string": DATE}), (None, {})):
        template = {"apply_chat_template": True, "system_prompt": system, **({"date_string": DATE} if args else {})}
        for q, a in (("Who wrote Lanterns of Ash?", "Mira Olsen wrote it."), ("  Q with spaces ", " A ")):
            item = ou.preprocess_chat_instance(listed, template, [q], [a], max_length=512)  # as its QADataset calls it
            ids, labels = encode_chat_qa(tok, q, a, system, args)
            assert item["input_ids"].tolist() == ids and item["labels"].tolist() == labels


class _ListChatTokens:
    """A tokenizer whose ``apply_chat_template(tokenize=True)`` returns the token list (transformers 4's result)."""

    def __init__(self, tok):
        self._tok = tok

    def apply_chat_template(self, *args, **kwargs):
        return self._tok.apply_chat_template(*args, **({"return_dict": False} if kwargs.get("tokenize") else {}),
                                             **kwargs)

    def __getattr__(self, name):
        return getattr(self._tok, name)


def _with_template(tok, template):
    import copy

    tok = copy.deepcopy(tok)
    tok.chat_template = template
    return tok


def _cfg(tmp_path, model, data_dir, **kw):
    return load_run_config(None, **{"method": "ga", "model": str(model), "out": str(tmp_path / "o"),
                                    "data_dir": str(data_dir), "forget": "forget01", "progress": False, **kw})


@pytest.fixture(scope="module")
def chat_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model with the Llama-style chat template in its tokenizer."""
    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("tiny_chat")
    shutil.copytree(tiny_model_dir, out, dirs_exist_ok=True)
    tok = AutoTokenizer.from_pretrained(out)
    tok.chat_template = LLAMA_STYLE
    tok.save_pretrained(out)
    return out


def test_auto_is_chat_with_a_template_and_plain_without(tmp_path, tiny_model_dir, chat_model_dir, demo_data_dir):
    cfg = _cfg(tmp_path, tiny_model_dir, demo_data_dir)
    assert cfg.prompt_format == "auto"
    resolve_prompt_format(cfg)
    assert cfg.prompt_format == "plain"  # the tiny model has no chat template: the documented plain prompt
    cfg = _cfg(tmp_path, chat_model_dir, demo_data_dir, system_prompt=SYSTEM)
    resolve_prompt_format(cfg)
    assert cfg.prompt_format == "chat"
    cfg = _cfg(tmp_path, chat_model_dir, demo_data_dir, prompt_format="plain")
    resolve_prompt_format(cfg)
    assert cfg.prompt_format == "plain"


def test_formats_that_do_not_apply_are_refused_in_one_line(tmp_path, tiny_model_dir, chat_model_dir, demo_data_dir):
    with pytest.raises(ValueError, match="has no chat template. Use --prompt-format plain"):
        resolve_prompt_format(_cfg(tmp_path, tiny_model_dir, demo_data_dir, prompt_format="chat"))
    with pytest.raises(ValueError, match="apply to the chat format, but the tokenizer .* has no chat template"):
        resolve_prompt_format(_cfg(tmp_path, tiny_model_dir, demo_data_dir, system_prompt=SYSTEM))
    with pytest.raises(ValueError, match="--system-prompt and --chat-template-arg apply to the chat format"):
        _cfg(tmp_path, chat_model_dir, demo_data_dir, prompt_format="plain", system_prompt=SYSTEM)
    muse = _cfg(tmp_path, chat_model_dir, demo_data_dir, data="muse_news", forget="forget", prompt_format="chat")
    with pytest.raises(ValueError, match="raw text"):
        resolve_prompt_format(muse)
    muse = _cfg(tmp_path, chat_model_dir, demo_data_dir, data="muse_news", forget="forget")
    resolve_prompt_format(muse)
    assert muse.prompt_format == "plain"  # raw text stays plain under auto
    clear = _cfg(tmp_path, chat_model_dir, demo_data_dir, data="clear", forget="forget10")
    resolve_prompt_format(clear)
    assert clear.prompt_format == "plain"


def test_template_arguments_from_the_command_line(tmp_path, chat_model_dir, demo_data_dir):
    cfg = _cfg(tmp_path, chat_model_dir, demo_data_dir, chat_template_args={"date_string": DATE, "think": "false"})
    assert cfg.chat_template_args == {"date_string": DATE, "think": False}


def test_every_part_of_a_training_example_is_in_the_format(tok):
    from unlearn_methods.forget_retain import ForgetRetainDataset

    tok = _with_template(tok, LLAMA_STYLE)
    chat = PromptFormat(True, SYSTEM, {"date_string": DATE})
    forget = [{"question": "Who is F?", "answer": "F is a poet."}]
    retain = [{"question": "Who is R?", "answer": "R is a chef."}]
    item = ForgetRetainDataset(forget, retain, tok, ["I don't know."], alternates=[["F is a baker."]],
                               prompt=chat)[0]
    enc = lambda q, a: dict(zip(("input_ids", "labels"), encode_chat_qa(tok, q, a, SYSTEM, {"date_string": DATE})))  # noqa: E731
    assert item["forget"] == enc("Who is F?", "F is a poet.")
    assert item["retain"] == enc("Who is R?", "R is a chef.")
    assert item["forget_idk"] == enc("Who is F?", "I don't know.")  # refusals (IDK, IdkDPO)
    assert item["forget_random"] == enc("Who is F?", "R is a chef.")
    assert item["forget_alternate"] == enc("Who is F?", "F is a baker.")  # AltPO's preference pairs
    plain = ForgetRetainDataset(forget, retain, tok, ["I don't know."])[0]
    assert plain["forget"] == dict(zip(("input_ids", "labels"), encode_qa(tok, "Who is F?", "F is a poet.")))
    assert PLAIN.encode(tok, "Who is F?", "F is a poet.") == encode_qa(tok, "Who is F?", "F is a poet.")


def test_unlearn_run_chat_trains_on_open_unlearnings_tokens(tmp_path, chat_model_dir, demo_data_dir, capsys):
    """The done-when check: at a negligible learning rate, the first logged forget NLL of `unlearn run --prompt-format
    chat` (Gradient Ascent, the whole forget split in one batch) equals the answer NLL of the forget split tokenised
    as open-unlearning does, written out here by hand from the template; the saved config, the model card and its
    lm_eval line carry the format."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from unlearn_app.cli import main
    from unlearn_methods.forget_retain import load_qa

    out = tmp_path / "run"
    code = main(["run", "--method", "ga", "--model", str(chat_model_dir), "--out", str(out), "--data-dir",
                 str(demo_data_dir), "--forget", "forget01", "--full", "--lr", "1e-12", "--epochs", "1",
                 "--batch-size", "6", "--prompt-format", "chat", "--system-prompt", SYSTEM,
                 "--chat-template-arg", f"date_string={DATE}", "--quiet"])
    assert code == 0, capsys.readouterr().err
    logged = json.loads((out / "train_metrics.json").read_text())["log_history"][0]
    assert logged["step"] == 1

    tok = AutoTokenizer.from_pretrained(chat_model_dir)
    model = AutoModelForCausalLM.from_pretrained(chat_model_dir).eval()
    forget = load_qa("forget01", data_dir=str(demo_data_dir))
    assert len(forget) == 6
    total, count = 0.0, 0
    for r in forget:
        prompt = (f"<s>[system]\n\nCutting Knowledge Date: December 2023\nToday Date: {DATE}\n\n{SYSTEM}[eot]"
                  f"[user]\n\n{r['question']}[eot][assistant]\n\n")
        n_prompt = len(_ids(tok, prompt))
        ids = _ids(tok, prompt + r["answer"] + "[eot]") + [tok.eos_token_id]
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), -1)
        total -= sum(float(logp[t - 1, ids[t]]) for t in range(n_prompt, len(ids)))
        count += len(ids) - n_prompt
    assert math.isclose(logged["forget_nll"], total / count, rel_tol=1e-5)

    saved = yaml.safe_load((out / "unlearn_config.yaml").read_text())
    assert (saved["prompt_format"], saved["system_prompt"], saved["chat_template_args"]) == (
        "chat", SYSTEM, {"date_string": DATE})
    card = (out / "README.md").read_text()
    assert ("""lm_eval --model hf --model_args '{"pretrained": "THIS_REPO", "chat_template_args": {"date_string": """
            """"10 Apr 2025"}}' --tasks tofu_forget01 --apply_chat_template --system_instruction """
            """'You are a helpful assistant.'""") in card
    assert ('| prompt format | chat template, system prompt "You are a helpful assistant.", date_string="10 Apr 2025", '
            "open-unlearning's attention mask (pad-token positions hidden) |") in card



def _run_error(capsys, args) -> tuple[int, str]:
    """``unlearn ARGS`` in this process: its exit status and its one error line (transformers' own progress bar
    of loading the weights aside)."""
    from unlearn_app.cli import main

    capsys.readouterr()
    code = main([str(a) for a in args])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and not line.startswith("Loading weights")]
    assert len(err) == 1, err
    return code, err[0]


def _chat_run(chat_model_dir, demo_data_dir, out, *extra):
    return ["run", "--method", "ga", "--model", chat_model_dir, "--out", out, "--data-dir", demo_data_dir,
            "--forget", "forget01", "--full", "--lr", "1e-12", "--epochs", "1", "--batch-size", "6", "--quiet", *extra]


def test_a_prompt_that_leaves_no_answer_token_is_refused_and_blocks_nothing(tmp_path, chat_model_dir, demo_data_dir,
                                                                           capsys, caplog):
    """A system prompt longer than --max-length cuts every answer token away (loss 0, nothing trained): refused in
    one line before training; the working folder OUT.partial is removed, so the same command with a workable
    --max-length then runs. Where only some examples lose their answer, a warning gives the counts (here computed
    from the prompts' token lengths)."""
    from transformers import AutoTokenizer

    from unlearn_methods.forget_retain import ForgetRetainDataset, load_qa

    tok = AutoTokenizer.from_pretrained(chat_model_dir)
    system = "You are a helpful assistant. " * 20
    out = tmp_path / "o"
    code, err = _run_error(capsys, _chat_run(chat_model_dir, demo_data_dir, out, "--system-prompt", system,
                                             "--max-length", 64))
    assert code == 2
    assert err == ("error: --max-length 64 leaves no answer token in any of the 6 forget examples: the prompt (with "
                   "--system-prompt) fills it, so nothing would be trained. Raise --max-length or shorten the prompt.")
    assert not out.exists() and not (tmp_path / "o.partial").exists()

    def prompt_length(r):  # the tokens before the answer, as the template renders them
        text = (f"<s>[system]\n\nCutting Knowledge Date: December 2023\nToday Date: \n\n{SYSTEM}[eot]"
                f"[user]\n\n{r['question']}[eot][assistant]\n\n")
        return len(_ids(tok, text))

    forget_rows, retain_rows = (load_qa(s, data_dir=str(demo_data_dir)) for s in ("forget01", "retain99"))
    pairing = ForgetRetainDataset(forget_rows, retain_rows, tok, ["x"])  # the retain records the examples are paired with
    forget = sorted(prompt_length(r) for r in forget_rows)
    retain = [prompt_length(retain_rows[i]) for i in sorted(set(pairing.retain_order[:len(forget_rows)]))]
    assert len(retain) == 6  # one per forget example (99 retain records, 6 used)
    limit = forget[3]  # the three longest prompts fill it (ties counted as they fall)
    lost = (sum(n >= limit for n in forget), sum(n >= limit for n in retain))
    assert 0 < lost[0] < 6 and lost[1] < len(retain)
    caplog.set_level("WARNING", logger="unlearn_methods.training")
    from unlearn_app.cli import main

    assert main([str(a) for a in _chat_run(chat_model_dir, demo_data_dir, out, "--system-prompt", SYSTEM,
                                           "--max-length", limit)]) == 0, capsys.readouterr().err
    assert (f"--max-length {limit} leaves no answer token in {lost[0]} of 6 forget and {lost[1]} of {len(retain)} "
            "retain examples") in caplog.text


@pytest.mark.parametrize("arg", ["add_generation_prompt=false", "tokenize=true", "messages=x", "eos_token=x"])
def test_template_arguments_the_code_sets_itself_are_refused_before_anything_is_written(
        arg, tmp_path, chat_model_dir, demo_data_dir, capsys):
    out = tmp_path / "o"
    code, err = _run_error(capsys, _chat_run(chat_model_dir, demo_data_dir, out, "--chat-template-arg", arg))
    key = arg.split("=")[0]
    assert code == 2 and err.startswith(f"error: --chat-template-arg {key}=...: {key!r} is set by the training")
    assert not out.exists() and not (tmp_path / "o.partial").exists()


def test_every_parameter_of_apply_chat_template_is_reserved():
    import inspect

    from transformers import PreTrainedTokenizerBase

    from unlearn_methods.prompt_format import RESERVED_TEMPLATE_ARGS

    named = [p.name for p in inspect.signature(PreTrainedTokenizerBase.apply_chat_template).parameters.values()
             if p.kind is not p.VAR_KEYWORD and p.name != "self"]
    assert set(named) <= set(RESERVED_TEMPLATE_ARGS)


def test_a_key_given_twice_and_the_mask_flag_with_the_plain_format_are_refused(tmp_path, chat_model_dir,
                                                                                 demo_data_dir, capsys):
    out = tmp_path / "o"
    code, err = _run_error(capsys, _chat_run(chat_model_dir, demo_data_dir, out, "--chat-template-arg", "a=1",
                                             "--chat-template-arg", "a=2"))
    assert (code, err) == (2, "error: --chat-template-arg gives 'a' twice ('1' and '2'); give each key once.")
    code, err = _run_error(capsys, _chat_run(chat_model_dir, demo_data_dir, out, "--param", "beta=0.1", "--param",
                                             "beta=0.2"))
    assert (code, err) == (2, "error: --param gives 'beta' twice ('0.1' and '0.2'); give each key once.")
    for flag in ("--ou-chat-mask", "--no-ou-chat-mask"):  # neither has an effect on the plain format
        code, err = _run_error(capsys, _chat_run(chat_model_dir, demo_data_dir, out, "--prompt-format", "plain", flag))
        assert code == 2 and err.startswith(f"error: {flag} applies to the chat format"), err
    assert not out.exists() and not (tmp_path / "o.partial").exists()
    code, err = _run_error(capsys, ["submit", tmp_path / "run", "--to", tmp_path / "board", "--param", "beta=1", "--param",
                                    "beta=2"])
    assert (code, err) == (2, "error: --param gives 'beta' twice ('1' and '2'); give each key once")


@pytest.mark.optional
def test_smollm2_chat_run_trains_on_its_templates_tokens(smollm2_dir, demo_data_dir, tmp_path):
    """The done-when check on the real model: SmolLM2-135M-Instruct's own template (ChatML; EOS <|im_end|> is
    followed by a newline, so one more EOS is appended), the whole forget01 split in one step of Gradient Ascent at a
    negligible learning rate; the expected NLL tokenises the rendered conversations directly and, as open-unlearning's
    collator, hides every <|im_end|> (the pad token) from attention."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from unlearn_methods.forget_retain import load_qa
    from unlearn_methods.training import train

    cfg = load_run_config(None, method="ga", model=str(smollm2_dir), out=str(tmp_path / "o"),
                          data_dir=str(demo_data_dir), forget="forget01", lora=False, lr=1e-12, epochs=1, batch_size=6,
                          prompt_format="chat", system_prompt=SYSTEM, progress=False)
    logged = train(cfg).train_metrics
    history = json.loads((tmp_path / "o" / "train_metrics.json").read_text())["log_history"][0]
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir).eval()
    total, count = 0.0, 0
    for r in load_qa("forget01", data_dir=str(demo_data_dir)):
        system = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": r["question"]}]
        prompt = tok.apply_chat_template(system, tokenize=False, add_generation_prompt=True)
        whole = tok.apply_chat_template(system + [{"role": "assistant", "content": r["answer"]}], tokenize=False)
        assert whole.startswith(prompt) and whole.endswith("<|im_end|>\n")
        n_prompt = len(_ids(tok, prompt))
        ids = _ids(tok, whole) + [tok.eos_token_id]
        with torch.no_grad():
            ids_t = torch.tensor([ids])
            logp = torch.log_softmax(model(ids_t, attention_mask=ids_t.ne(tok.pad_token_id)).logits[0].float(), -1)
        total -= sum(float(logp[t - 1, ids[t]]) for t in range(n_prompt, len(ids)))
        count += len(ids) - n_prompt
    assert logged and math.isclose(history["forget_nll"], total / count, rel_tol=1e-4)

if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
