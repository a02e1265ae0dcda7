"""``unlearn margins`` (one model's margins without knowing lm-eval) and ``unlearn margins gather`` (runs into an
ensemble array)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from harness_ext.evaluate import run_lm_eval
from unlearn_app.cli import main
from unlearn_tasks.margins.ensemble import read_record


@pytest.fixture(scope="module")
def tofu_run(tiny_model_dir, demo_data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("margins_tofu")
    run_lm_eval(tiny_model_dir, ["margins_tofu_forget01"], out, {"data_dir": str(demo_data_dir)})
    return out, None


@pytest.mark.slow
def test_unlearn_margins_and_gather(tofu_run, tiny_model_dir, demo_data_dir, tmp_path, capsys):
    out, _ = tofu_run
    record, _ = read_record(out)
    assert main(["margins", "gather", str(out), str(out), "--out", str(tmp_path / "ens.npy"), "--splits-out",
                 str(tmp_path / "splits.json")]) == 0
    ens = np.load(tmp_path / "ens.npy")
    assert ens.shape == (2, len(record["margins"]))
    assert np.allclose(ens[1], record["margins"])
    assert json.loads((tmp_path / "splits.json").read_text()) == record["splits"]
    # unlearn margins (no lm-eval knowledge needed) gives the same numbers
    assert main(["margins", "--model", str(tiny_model_dir), "--data", "tofu", "--forget", "forget01", "--data-dir",
                 str(demo_data_dir), "--out", str(tmp_path / "m.npy")]) == 0
    assert np.allclose(np.load(tmp_path / "m.npy"), record["margins"], atol=1e-6)
    capsys.readouterr()
    assert main(["margins", "--model", str(tiny_model_dir), "--out", str(tmp_path / "m2.npy")]) == 2
    assert "--data" in capsys.readouterr().err
    assert main(["margins", "gather", str(tmp_path), "--out", str(tmp_path / "x.npy")]) == 2


@pytest.mark.slow
def test_unlearn_margins_several_models_and_a_lora_adapter(tofu_run, tiny_model_dir, demo_data_dir, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    record, _ = read_record(tofu_run[0])
    adapter = tmp_path / "adapter"
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    peft_model = get_peft_model(base, LoraConfig(r=2, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    peft_model.save_pretrained(adapter)
    config = json.loads((adapter / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(tiny_model_dir)
    (adapter / "adapter_config.json").write_text(json.dumps(config))
    assert main(["margins", "--model", str(tiny_model_dir), str(adapter), "--data", "tofu", "--forget", "forget01",
                 "--data-dir", str(demo_data_dir), "--out", str(tmp_path / "ens.npy"), "--quiet"]) == 0
    ens = np.load(tmp_path / "ens.npy")
    assert ens.shape == (2, len(record["margins"]))
    assert np.allclose(ens[0], record["margins"], atol=1e-6)
    assert not np.allclose(ens[1], ens[0], atol=1e-4)  # the adapter (random LoRA weights) was applied
