"""LoRA adapter folders load on their base model, the same way for `unlearn ci` and `unlearn margins`."""

import json

import pytest

from unlearn_app.checkpoint.adapter import Adapter, AdapterError, find_adapter
from unlearn_app.cli import main


def _adapter(folder, **config):
    folder.mkdir()
    (folder / "adapter_config.json").write_text(json.dumps(config))
    return folder


def test_full_models_are_not_adapters(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert find_adapter(tmp_path) is None
    assert find_adapter("owner/name") is None


def test_adapter_args_for_each_backend(tmp_path):
    folder = _adapter(tmp_path / "a", base_model_name_or_path="base/model", r=9)
    adapter = find_adapter(str(folder))
    assert adapter == Adapter(str(folder), "base/model", 9)
    assert adapter.model_args("hf") == {"pretrained": "base/model", "peft": str(folder)}
    assert adapter.model_args("vllm") == {"pretrained": "base/model", "lora_local_path": str(folder),
                                          "max_lora_rank": 16}  # 8 -> 16, the first power of two >= 9
    assert Adapter("x", "b", 8).model_args("vllm")["max_lora_rank"] == 8
    assert find_adapter(_adapter(tmp_path / "norank", base_model_name_or_path="b")).rank == 8


def test_adapter_without_base_is_an_error(tmp_path, capsys):
    folder = _adapter(tmp_path / "a", r=8)
    with pytest.raises(AdapterError, match="names no base_model_name_or_path"):
        find_adapter(folder)
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": "a", "target": "b"}) + "\n")
    assert main(["margins", "--model", str(folder), "--data", str(data), "--out", str(tmp_path / "m.npy")]) == 2
    assert "names no base_model_name_or_path" in capsys.readouterr().err


@pytest.mark.parametrize("rank", ["8", 2.5, 0, -4, True, [8]])
def test_adapter_rank_that_is_not_a_whole_number_is_one_line(tmp_path, capsys, rank):
    folder = _adapter(tmp_path / "a", base_model_name_or_path="b", r=rank)
    with pytest.raises(AdapterError, match=r'"r" \(the LoRA rank\) is .* whole number of at least 1'):
        find_adapter(folder)
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": "a", "target": "b"}) + "\n")
    assert main(["margins", "--model", str(folder), "--data", str(data), "--out", str(tmp_path / "m.npy")]) == 2
    err = capsys.readouterr().err.strip()
    assert "LoRA rank" in err and "\n" not in err and "Traceback" not in err
