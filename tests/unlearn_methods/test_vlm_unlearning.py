"""Unlearning a vision-language model on CLEAR: a tiny LLaVA memorises the synthetic people (captions of their faces
and text facts), then `unlearn run --data clear --modality text|image|both` lowers the forget set's answer
probability much more than the retain set's; every method runs with pixel values in its batches; checkpoints load in
lm-eval's hf-multimodal."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("PIL")
torch = pytest.importorskip("torch")

import unlearn_methods.methods  # noqa: E402,F401
from fixtures.method_trends import assert_trends  # noqa: E402
from unlearn_methods.config import load_run_config  # noqa: E402
from unlearn_methods.training import UnlearningFailed, train  # noqa: E402
from unlearn_methods.vlm import (  # noqa: E402
    answer_probability,
    clear_records,
    collate_vqa,
    encode_vqa,
    finetune_vlm,
    load_vision_model,
)

VISION_METHODS = ("ga", "graddiff", "kl", "idk", "dpo", "npo", "simnpo", "scrub", "llmu", "rmu", "retain_ft", "undial",
                  "wga", "satimp", "ceu", "pdu")


@pytest.fixture(scope="module")
def memorised_llava(tiny_llava_dir, clear_data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("memorised_llava")
    processor, model = load_vision_model(str(tiny_llava_dir), torch.float32)
    losses = finetune_vlm(model, processor, clear_records("full", "both", str(clear_data_dir)), epochs=30, lr=3e-3,
                          batch_size=16)
    assert losses[-1] < 0.3 * losses[0]
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def _cfg(tmp_path, model_dir, data_dir, name, **kw):
    base = dict(method="graddiff", model=str(model_dir), out=str(tmp_path / name), data="clear",
                data_dir=str(data_dir), forget="forget10", lora=False, epochs=3, batch_size=4, lr=5e-4, progress=False)
    base.update(kw)
    return load_run_config(None, **base)


def _probs(model_dir, data_dir, modality):
    processor, model = load_vision_model(str(model_dir), torch.float32)
    return {s: answer_probability(model, processor, clear_records(s, modality, str(data_dir)))
            for s in ("forget10", "retain90")}


def test_encoding_matches_the_evaluated_split_and_carries_pixels(tiny_llava_dir, clear_data_dir):
    processor, _ = load_vision_model(str(tiny_llava_dir))
    rec = clear_records("forget10", "image", str(clear_data_dir))[0]
    item = encode_vqa(processor, rec["question"], rec["answer"], rec["image"])
    n_prompt = item["labels"].count(-100)
    prompt = processor(text=f"<image>\nQuestion: {rec['question']}\nAnswer:", images=[rec["image"]])
    assert item["input_ids"][:n_prompt] == list(prompt["input_ids"][0])
    assert item["input_ids"][-1] == processor.tokenizer.eos_token_id
    assert processor.tokenizer.decode(item["input_ids"][n_prompt:-1]).strip() == rec["answer"]
    text = clear_records("forget10", "text", str(clear_data_dir))[0]
    batch = collate_vqa([item, encode_vqa(processor, text["question"], text["answer"])], processor.tokenizer.pad_token_id)
    assert batch["pixel_values"].shape == (1, 3, 32, 32) and batch["input_ids"].shape[0] == 2


@pytest.mark.slow
@pytest.mark.parametrize("modality", ["text", "image", "both"])
def test_unlearning_moves_forget_more_than_retain(modality, memorised_llava, clear_data_dir, tmp_path):
    before = _probs(memorised_llava, clear_data_dir, modality)
    assert before["forget10"] > 0.5 and before["retain90"] > 0.5
    trained = train(_cfg(tmp_path, memorised_llava, clear_data_dir, modality, modality=modality))
    after = _probs(trained.out, clear_data_dir, modality)
    forget_drop = before["forget10"] - after["forget10"]
    retain_drop = before["retain90"] - after["retain90"]
    assert forget_drop > 0.1
    # The memorised model is itself trained, and GradDiff's ascent at this rate amplifies float summation order: two
    # mathematically equal loss codes gave, with both modalities, drops of 0.32 / 0.12 and 0.52 / 0.31 (2.8x, 1.7x).
    assert forget_drop > 1.5 * retain_drop, (before, after)


@pytest.mark.parametrize("method", VISION_METHODS)
def test_every_method_trains_on_image_batches(method, memorised_llava, clear_data_dir, tmp_path):
    """Each method trains on image batches of the memorised model and its loss terms move the way the method says
    (not only 'it ran')."""
    trained = train(_cfg(tmp_path, memorised_llava, clear_data_dir, method, method=method, modality="both", epochs=2,
                         lora=method in ("npo", "rmu"), l1_lora=1e-4 if method == "npo" else 0.0,
                         # a short run: for SCRUB every step a 'max' step, so the forget KL is logged and moves
                         method_params={"max_every": 1, "max_fraction": 1.0} if method == "scrub" else {}))
    log = json.loads((trained.out / "train_metrics.json").read_text())["log_history"]
    losses = [entry["loss"] for entry in log if "loss" in entry]
    assert losses and all(torch.isfinite(torch.tensor(float(v))) for v in losses), log
    assert_trends(trained.out, method)
    assert (trained.out / "processor_config.json").is_file() or (trained.out / "preprocessor_config.json").is_file()


def test_text_copy_methods_are_refused_with_a_reason_before_any_file_is_written(tiny_llava_dir, clear_data_dir,
                                                                                 tmp_path):
    with pytest.raises(UnlearningFailed, match="not available with --data clear"):
        train(_cfg(tmp_path, tiny_llava_dir, clear_data_dir, "tv", method="task_vector"))
    assert not (tmp_path / "tv").exists() and not (tmp_path / "tv.partial").exists()


def test_lora_checkpoint_loads_in_hf_multimodal(tiny_llava_dir, clear_data_dir, tmp_path):
    from lm_eval.api.instance import Instance
    from lm_eval.models.hf_vlms import HFMultimodalLM

    from harness_ext.request_types import ANSWER_LOGPROBS, install_request_types

    trained = train(_cfg(tmp_path, tiny_llava_dir, clear_data_dir, "lora", lora=True, modality="image", epochs=1,
                         lr=5e-2, l1_lora=1e-4))
    assert trained.adapter and (trained.out / "adapter_config.json").is_file()
    install_request_types()
    rec = clear_records("forget10", "image", str(clear_data_dir))[0]
    req = Instance(request_type=ANSWER_LOGPROBS, doc={}, idx=0,
                   arguments=(f"<image>\nQuestion: {rec['question']}\nAnswer:", " " + rec["answer"], {"visual": [rec["image"]]}))
    base = HFMultimodalLM(pretrained=str(tiny_llava_dir), device="cpu", batch_size=1)
    adapted = HFMultimodalLM(pretrained=str(tiny_llava_dir), peft=str(trained.out), device="cpu", batch_size=1)
    a = getattr(base, ANSWER_LOGPROBS)([req])[0]["logprobs"]
    b = getattr(adapted, ANSWER_LOGPROBS)([req])[0]["logprobs"]
    assert len(a) == len(b) and a != pytest.approx(b, abs=1e-4)  # the adapter is applied
    shutil.rmtree(trained.out / "checkpoints", ignore_errors=True)


def test_forward_and_the_reference_pass_the_image_tensors():
    from unlearn_methods.base import MethodContext
    from unlearn_methods.losses import forward

    seen = []

    def model(**kwargs):
        seen.append(sorted(kwargs))
        return kwargs

    batch = {"input_ids": torch.ones(1, 3, dtype=torch.long), "attention_mask": torch.ones(1, 3),
             "labels": torch.ones(1, 3), "pixel_values": torch.zeros(1, 3, 4, 4)}
    forward(model, batch, output_hidden_states=True)
    MethodContext(trainer=None, reference=model).reference_outputs(batch)
    assert seen == [["attention_mask", "input_ids", "output_hidden_states", "pixel_values"],
                    ["attention_mask", "input_ids", "pixel_values"]]


@pytest.mark.slow
def test_unlearn_run_command_with_clear_evaluates_on_hf_multimodal(tiny_llava_dir, clear_data_dir, tmp_path):
    import yaml

    from fixtures.commands import run_command

    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"eval_metadata": {"max_items_per_split": 1, "parts": ["likelihood"]}}))
    out = tmp_path / "ckpt"
    proc = run_command(["unlearn", "run", "--config", str(config), "--data", "clear", "--data-dir", str(clear_data_dir),
                        "--model", str(tiny_llava_dir), "--forget", "forget10", "--modality", "image",
                        "--method", "graddiff", "--full", "--epochs", "1", "--batch-size", "4", "--quiet",
                        "--eval-tasks", "clear_forget10_image", "--out", str(out)], timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "model.safetensors").is_file() and (out / "processor_config.json").is_file()
    card = (out / "README.md").read_text()
    assert "clear_forget10_image" in card and "forget_caption_prob" in card
    assert "lm_eval --model hf-multimodal" in card and "| modality | image |" in card
