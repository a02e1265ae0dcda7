"""``unlearn depth`` end to end on tiny models: its results file and plot, the architecture check, a LoRA adapter as
the unlearned model, and the UDS in ``unlearn report`` and ``unlearn ci``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from unlearn_app.cli import main

pytest.importorskip("torch")


def _run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _config_only(folder: Path, layers: int) -> Path:
    from unlearn_methods.scaffolding.tiny_model import tiny_llama_config

    folder.mkdir(parents=True)
    tiny_llama_config(100, num_hidden_layers=layers).save_pretrained(folder)
    return folder


def test_architecture_mismatch_is_one_line_before_any_weights(tmp_path, capsys):
    a, b = _config_only(tmp_path / "a", 2), _config_only(tmp_path / "b", 3)  # configs only: no weights to load
    code, _, err = _run(["depth", "--model", str(a), "--target", str(b), "--retain", str(b),
                         "--out", str(tmp_path / "o")], capsys)
    assert code == 2
    assert err.strip() == ("error: --model differs from --target in num_hidden_layers (2 vs 3); UDS patches hidden "
                           "states between models of one architecture (give the same base model's checkpoints)")
    assert not (tmp_path / "o").exists()


def test_a_config_whose_shapes_differ_from_its_weights_is_one_line(tiny_model_dir, demo_data_dir, tmp_path, capsys):
    """The weights load with a config that declares a wider MLP: transformers would print its load report and a
    traceback (or, told to ignore the sizes, leave those layers random); here one line, exit 2, nothing written."""
    import shutil

    wide = tmp_path / "wide"
    shutil.copytree(tiny_model_dir, wide)
    config = json.loads((wide / "config.json").read_text())
    (wide / "config.json").write_text(json.dumps({**config, "intermediate_size": 2 * config["intermediate_size"]}))
    code, _, err = _run(["depth", "--model", str(wide), "--target", str(tiny_model_dir), "--retain",
                         str(tiny_model_dir), "--data", "demo", "--data-dir", str(demo_data_dir), "--forget",
                         "forget01", "--out", str(tmp_path / "o"), "--quiet"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"error: --model {wide}: its weights do not match its config.json (6 of another shape, e.g. "
                          f"model.layers.0.mlp.down_proj.weight: [128, {config['intermediate_size']}] in the weights")
    assert not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def three_models(tmp_path_factory, tiny_model_dir):
    """The tiny model as target; a retain stand-in with its decoder layers moved; an unlearned LoRA adapter on the
    target (random, non-zero) and the same adapter merged into a full folder."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root = tmp_path_factory.mktemp("depth_models")
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    retain = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in retain.model.layers.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=gen))
    retain.save_pretrained(root / "retain")
    tokenizer.save_pretrained(root / "retain")
    torch.manual_seed(4)
    peft = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir),
                          LoraConfig(r=4, target_modules=["q_proj", "v_proj", "down_proj"], init_lora_weights=False))
    peft.save_pretrained(root / "adapter")
    merged = peft.merge_and_unload()
    merged.save_pretrained(root / "merged")
    tokenizer.save_pretrained(root / "merged")
    return {"target": Path(tiny_model_dir), "retain": root / "retain", "adapter": root / "adapter",
            "merged": root / "merged"}


def _depth(models, unlearned, out, data_dir, capsys, *extra):
    code, stdout, err = _run(["depth", "--model", str(unlearned), "--target", str(models["target"]), "--retain",
                              str(models["retain"]), "--data", "demo", "--data-dir", str(data_dir), "--forget",
                              "forget01", "--tau", "0", "--out", str(out), "--quiet", *extra], capsys)
    assert code == 0, err
    return json.loads((out / "results_uds.json").read_text()), stdout


def test_adapter_equals_merged_and_endpoints(three_models, demo_data_dir, tmp_path, capsys):
    adapter, stdout = _depth(three_models, three_models["adapter"], tmp_path / "a", demo_data_dir, capsys)
    merged, _ = _depth(three_models, three_models["merged"], tmp_path / "m", demo_data_dir, capsys)
    task = "forget01_uds"
    cfg_a, cfg_m = adapter["configs"][task], merged["configs"][task]
    flat = [[v for i in cfg["per_item"] for v in i["s2"]] for cfg in (cfg_a, cfg_m)]
    assert flat[0] == pytest.approx(flat[1], abs=1e-4)
    assert adapter["results"][task]["uds,none"] == pytest.approx(merged["results"][task]["uds,none"], abs=1e-4)
    assert cfg_a["models"]["model"]["base"] == str(three_models["target"]) and "adapter_sha256" in cfg_a["models"]["model"]
    n = len(cfg_a["per_item"])
    assert n == 6 and adapter["results"][task]["skipped,none"] == 0
    assert len(cfg_a["per_layer"]) == 2 and all(len(i["s1"]) == 2 for i in cfg_a["per_item"])
    assert stdout.startswith("UDS ") and (tmp_path / "a" / "uds_layers.png").stat().st_size > 0
    # unlearned == retain: stage 2 is stage 1, UDS 1; unlearned == target with layer outputs: UDS 0
    same, _ = _depth(three_models, three_models["retain"], tmp_path / "r", demo_data_dir, capsys)
    assert same["results"][task]["uds,none"] == 1.0
    none, _ = _depth(three_models, three_models["target"], tmp_path / "t", demo_data_dir, capsys,
                     "--states", "layer_output")
    assert none["results"][task]["uds,none"] == pytest.approx(0.0, abs=1e-4)
    # the per-item values are the score function's
    from unlearn_tasks.metrics.depth import example_depth

    item = cfg_a["per_item"][0]
    assert item["uds"] == pytest.approx(example_depth(item["full"], item["s1"], item["s2"], tau=0.0).uds)

    # unlearn report shows the UDS; unlearn ci gates on it
    code, report, err = _run(["report", str(tmp_path / "a")], capsys)
    assert code == 0, err
    assert "## forget01_uds" in report and "\n| uds | " in report
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"tasks: [{task}]\nchecks:\n  - {task}/uds >= -0.01\n  - {task}/uds >= 1.01\n")
    code, _, _ = _run(["ci", "--suite", str(suite), "--from-results", str(tmp_path / "a"), "--out",
                       str(tmp_path / "ci")], capsys)
    checks = json.loads((tmp_path / "ci" / "results.json").read_text())["checks"]
    assert code == 1 and [c["passed"] for c in checks] == [True, False]


def test_submit_carries_the_depth_results_and_validate_recomputes_them(three_models, demo_data_dir, tmp_path, capsys):
    """The command's own output through `unlearn submit --to` and `unlearn leaderboard validate`: every number
    recomputed from the carried per-layer scores at the run's tau, and validated."""
    _depth(three_models, three_models["merged"], tmp_path / "u", demo_data_dir, capsys, "--tau", "0.01")
    code, out, err = _run(["submit", str(tmp_path / "u"), "--model-dir", str(three_models["merged"]), "--method",
                           "lora", "--to", str(tmp_path / "board")], capsys)
    assert code == 0, err
    assert "validated; 4 aggregate(s) recomputed from per-item values, 0 unverified" in out
    assert "samples" not in err  # not reported as a task without per-item values
    (folder,) = (tmp_path / "board" / "submissions").iterdir()
    record = json.loads((folder / "submission.json").read_text())
    entry = record["results"]["forget01_uds"]
    assert entry["depth"] == "depth/forget01_uds.json" and entry["depth"] in record["files"]
    assert entry["provenance"]["metric_modes"]["tau"] == 0.01
    code, out, err = _run(["leaderboard", "validate", str(tmp_path / "board")], capsys)
    assert code == 0 and out.startswith("validated "), out + err
