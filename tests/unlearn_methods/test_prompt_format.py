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
