"""`unlearn run --ou-chat-mask` (the chat format's default): training batches carry open-unlearning's attention mask,
``input_ids != pad_token_id`` (its ``DataCollatorForSupervisedDataset``), which hides every end-of-turn token where
the pad token ends a turn (Llama-3 padded with EOS = <|eot_id|>, SmolLM2's <|im_end|>). The loss on a batch equals
the model's own loss on the batch built by hand under that mask; ``--no-ou-chat-mask`` attends to every token but
the padding and gives another loss."""

import shutil

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from unlearn_methods import get_method
from unlearn_methods.config import load_run_config
from unlearn_methods.data_sources import data_source
from unlearn_methods.forget_retain import ForgetRetainDataset, load_qa
from unlearn_methods.prompt_format import PromptFormat, prompt_format_of

SYSTEM = "You are a helpful assistant."
DATE = "10 Apr 2025"
#: Llama-3.2-Instruct's template, shortened to what a TOFU item uses.
LLAMA3_TEMPLATE = (
    "{{- bos_token }}"
    "{{- '<|start_header_id|>system<|end_header_id|>\\n\\nCutting Knowledge Date: December 2023\\n' }}"
    "{{- 'Today Date: ' + date_string + '\\n\\n' }}{{- messages[0]['content'] | trim }}{{- '<|eot_id|>' }}"
    "{%- for message in messages[1:] %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)


@pytest.fixture(scope="module")
def llama3_dir(tiny_model_dir, tmp_path_factory):
    """The tiny Llama with Llama-3's special tokens and template, padded with EOS (<|eot_id|>) as open-unlearning pads
    Llama-3.2-Instruct (its tokenizer has no pad token)."""
    out = tmp_path_factory.mktemp("llama3_eot_pad")
    shutil.copytree(tiny_model_dir, out, dirs_exist_ok=True)
    tok = AutoTokenizer.from_pretrained(out)
    tok.add_special_tokens({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "pad_token": "<|eot_id|>",
                            "additional_special_tokens": ["<|start_header_id|>", "<|end_header_id|>"]})
    tok.chat_template = LLAMA3_TEMPLATE
    tok.save_pretrained(out)
    model = AutoModelForCausalLM.from_pretrained(out)
    model.resize_token_embeddings(len(tok))
    torch.manual_seed(0)
    with torch.no_grad():  # weights that read the context (the tiny model's own barely do)
        for weight in (p for p in model.parameters() if p.dim() == 2):
            weight.normal_(0.0, 0.3)
    model.save_pretrained(out)
    return out


def _batch(model_dir, data_dir, ou_chat_mask: bool, template_args: dict):
    """A collated batch of 2 forget / retain examples built as `unlearn run` builds them (its data source's dataset
    and collator for the run's config)."""
    tok = AutoTokenizer.from_pretrained(model_dir)
    cfg = load_run_config(None, method="graddiff", model=str(model_dir), out="unused", data_dir=str(data_dir),
                          forget="forget01", prompt_format="chat", system_prompt=SYSTEM,
                          chat_template_args=template_args, ou_chat_mask=ou_chat_mask)
    prompt = prompt_format_of(cfg)
    assert prompt.ou_chat_mask is ou_chat_mask
    dataset = ForgetRetainDataset(load_qa("forget01", data_dir=str(data_dir)), load_qa("retain99", data_dir=str(data_dir)),
                                  tok, ["I don't know."], prompt=prompt)
    return tok, data_source("tofu").collator(tok, prompt)([dataset[i] for i in range(2)])


def _by_hand(model, part: dict, mask: torch.Tensor) -> float:
    """The Trainer-free loss: the model's own mean token NLL of the labels under ``mask``."""
    with torch.no_grad():
        return float(model(input_ids=part["input_ids"], attention_mask=mask, labels=part["labels"]).loss)


def _graddiff(model, batch) -> float:
    """Our graddiff loss on ``batch`` (its NLL retain term needs no context)."""
    with torch.no_grad():
        loss, _ = get_method("graddiff", {}).loss(None, model, batch)
    return float(loss)


def _check(model_dir, data_dir, template_args, rel):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    tok, ou = _batch(model_dir, data_dir, True, template_args)
    _, plain = _batch(model_dir, data_dir, False, template_args)
    pad = tok.pad_token_id
    for part in ("forget", "retain"):
        ids = ou[part]["input_ids"]
        assert torch.equal(ids, plain[part]["input_ids"]) and torch.equal(ou[part]["labels"], plain[part]["labels"])
        assert torch.equal(ou[part]["attention_mask"].bool(), ids.ne(pad))  # open-unlearning's collator, by hand
        lengths = plain[part]["attention_mask"].sum(-1)
        inside = torch.arange(ids.shape[1])[None, :] < lengths[:, None] - 1
        assert int((ids.eq(pad) & inside).sum()) >= 2 * ids.shape[0]  # end-of-turn tokens hidden inside every row
    # graddiff = -NLL(forget) + NLL(retain), each the model's own loss under open-unlearning's mask
    expected = -_by_hand(model, ou["forget"], ou["forget"]["input_ids"].ne(pad)) + _by_hand(
        model, ou["retain"], ou["retain"]["input_ids"].ne(pad))
    assert _graddiff(model, ou) == pytest.approx(expected, rel=rel)
    # --no-ou-chat-mask: every token but the padding attended, another loss
    full = -_by_hand(model, plain["forget"], plain["forget"]["attention_mask"]) + _by_hand(
        model, plain["retain"], plain["retain"]["attention_mask"])
    assert _graddiff(model, plain) == pytest.approx(full, rel=rel)
    assert abs(full - expected) > 100 * rel * abs(expected)


def test_loss_under_open_unlearnings_mask_on_a_llama3_template(llama3_dir, demo_data_dir):
    _check(llama3_dir, demo_data_dir, {"date_string": DATE}, rel=1e-5)


@pytest.mark.optional
def test_loss_under_open_unlearnings_mask_on_smollm2(smollm2_dir, demo_data_dir):
    _check(smollm2_dir, demo_data_dir, {}, rel=1e-4)  # float32 sums over SmolLM2's 49k-token vocabulary


def test_the_mask_option_defaults_on_applies_to_chat_and_is_saved(tmp_path, tiny_model_dir, demo_data_dir):
    base = dict(method="ga", model=str(tiny_model_dir), out=str(tmp_path / "o"), data_dir=str(demo_data_dir))
    assert load_run_config(None, **base).ou_chat_mask is True
    assert load_run_config(None, **base).to_dict()["ou_chat_mask"] is True
    with pytest.raises(ValueError, match=r"^--no-ou-chat-mask applies to the chat format .*--prompt-format chat"):
        load_run_config(None, **base, prompt_format="plain", ou_chat_mask=False)
    plain = load_run_config(None, **base, prompt_format="plain")
    assert prompt_format_of(plain) == PromptFormat()  # the plain format never hides the pad token


def test_flags_set_the_option(tiny_model_dir):
    from unlearn_app.cli import build_parser
    from unlearn_app.commands.run import option_values

    parser = build_parser()
    common = ["run", "--model", str(tiny_model_dir), "--out", "o"]
    assert option_values(parser.parse_args([*common, "--no-ou-chat-mask"]))["ou_chat_mask"] is False
    assert option_values(parser.parse_args([*common, "--ou-chat-mask"]))["ou_chat_mask"] is True
    assert "ou_chat_mask" not in option_values(parser.parse_args(common))


def test_runs_saved_before_the_option_resume_with_the_mask_they_trained_with(tmp_path):
    """A chat run saved before the option trained with every token attended: --resume needs --no-ou-chat-mask; a
    plain run saved then resumes as it is (the option does not apply to it)."""
    import yaml

    from unlearn_methods.training import CONFIG_FILE, UnlearningFailed, check_resume, portable_config

    for fmt in ("chat", "plain"):
        cfg = load_run_config(None, model="m", out=str(tmp_path), prompt_format=fmt)
        saved = {k: v for k, v in portable_config(cfg, tmp_path).items() if k != "ou_chat_mask"}
        (tmp_path / CONFIG_FILE).write_text(yaml.safe_dump(saved, sort_keys=False))
        if fmt == "plain":
            check_resume(cfg, tmp_path)
            continue
        with pytest.raises(UnlearningFailed, match="ou_chat_mask: saved False, now True"):
            check_resume(cfg, tmp_path)
        check_resume(load_run_config(None, model="m", out=str(tmp_path), prompt_format=fmt, ou_chat_mask=False),
                     tmp_path)


def test_runs_saved_before_a_hyperparameter_was_added_resume(tmp_path):
    """An npo run saved before ``retain_loss`` existed resumes (the new parameter at its default, the run's value)."""
    import yaml

    from unlearn_methods.training import CONFIG_FILE, UnlearningFailed, check_resume, portable_config

    cfg = load_run_config(None, model="m", out=str(tmp_path), method="npo")
    saved = portable_config(cfg, tmp_path)
    saved["method_params"] = {k: v for k, v in saved["method_params"].items() if k != "retain_loss"}
    (tmp_path / CONFIG_FILE).write_text(yaml.safe_dump(saved, sort_keys=False))
    check_resume(cfg, tmp_path)
    kl = load_run_config(None, model="m", out=str(tmp_path), method="npo", method_params={"retain_loss": "kl"})
    with pytest.raises(UnlearningFailed, match="method_params: saved .*'retain_loss': 'nll'.*now .*'retain_loss': 'kl'"):
        check_resume(kl, tmp_path)
