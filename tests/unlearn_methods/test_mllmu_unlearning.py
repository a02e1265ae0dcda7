"""`unlearn run --data mllmu` on a tiny LLaVA: the forget / retain records (photo question-answer pairs, text facts),
a full and a LoRA run that lower the forget answers' probability, wrong splits refused, and (slow) the command with its
evaluation on hf-multimodal."""

from __future__ import annotations

import pytest

pytest.importorskip("PIL")
torch = pytest.importorskip("torch")

import unlearn_methods.methods  # noqa: E402,F401
from unlearn_methods.config import load_run_config  # noqa: E402
from unlearn_methods.training import train  # noqa: E402
from unlearn_methods.vlm import answer_probability, load_vision_model, mllmu_records  # noqa: E402


def _cfg(tmp_path, model_dir, data_dir, name, **kw):
    base = dict(method="ga", model=str(model_dir), out=str(tmp_path / name), data="mllmu", data_dir=str(data_dir),
                forget="forget05", lora=False, epochs=2, batch_size=4, lr=5e-3, progress=False)
    base.update(kw)
    return load_run_config(None, **base)


def test_records_per_modality(mllmu_data_dir):
    image = mllmu_records("forget05", "image", str(mllmu_data_dir))
    text = mllmu_records("forget05", "text", str(mllmu_data_dir))
    both = mllmu_records("retain_95", "both", str(mllmu_data_dir))
    assert len(image) == 2 and image[0]["image"].size == (16, 16) and image[0]["answer"].endswith(".")
    assert len(text) == 2 and all(r["image"] is None for r in text)  # one text generation question per person
    assert len(both) == 38 * 2


def test_the_forget_split_must_be_a_percentage(tmp_path, tiny_llava_dir, mllmu_data_dir):
    with pytest.raises(ValueError, match="--data mllmu needs --forget forget05 / forget10 / forget15"):
        _cfg(tmp_path, tiny_llava_dir, mllmu_data_dir, "x", forget="forget01")


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_gradient_ascent_lowers_the_forget_answers(lora, tmp_path, tiny_llava_dir, mllmu_data_dir):
    records = mllmu_records("forget05", "both", str(mllmu_data_dir))
    processor, model = load_vision_model(str(tiny_llava_dir), torch.float32)
    before = answer_probability(model, processor, records)
    cfg = _cfg(tmp_path, tiny_llava_dir, mllmu_data_dir, "run", lora=lora, **({"lr": 5e-2, "epochs": 4} if lora else {}))
    trained = train(cfg)
    if lora:
        from peft import PeftModel

        assert trained.adapter and (trained.out / "adapter_config.json").is_file()
        model = PeftModel.from_pretrained(load_vision_model(str(tiny_llava_dir), torch.float32)[1], str(trained.out))
    else:
        assert (trained.out / "model.safetensors").is_file()
        processor, model = load_vision_model(str(trained.out), torch.float32)
    after = answer_probability(model, processor, records)
    assert after < (0.7 if lora else 0.5) * before, (before, after)  # one step per epoch: 4 forget records


@pytest.mark.slow
def test_unlearn_run_command_with_mllmu_evaluates_on_hf_multimodal(tiny_llava_dir, mllmu_data_dir, tmp_path):
    import yaml

    from fixtures.commands import run_command

    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({"eval_metadata": {"max_items_per_split": 1, "parts": ["generation"]}}))
    out = tmp_path / "ckpt"
    proc = run_command(["unlearn", "run", "--config", str(config), "--data", "mllmu", "--data-dir", str(mllmu_data_dir),
                        "--model", str(tiny_llava_dir), "--forget", "forget05", "--modality", "image",
                        "--method", "graddiff", "--full", "--epochs", "1", "--batch-size", "4", "--quiet",
                        "--eval-tasks", "mllmu_forget05_image", "--out", str(out)], timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    card = (out / "README.md").read_text()
    assert "mllmu_forget05_image" in card and "forget_rougeL" in card
    assert "lm_eval --model hf-multimodal" in card
