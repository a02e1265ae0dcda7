"""WMDP beside our tasks (slow): lm-eval's own `wmdp` group and `tofu_forget10` in one `lm_eval` invocation,
offline on WMDP-schema questions written by this project, and `unlearn report` knows WMDP's metric."""

import json

import pytest

from fixtures.commands import run_command
from fixtures.wmdp import CONFIGS, write_wmdp_cache

pytestmark = pytest.mark.slow


def test_wmdp_and_tofu_in_one_invocation_then_report(tiny_model_dir, demo_data_dir, tmp_path):
    cache = write_wmdp_cache(tmp_path / "hf_datasets_cache")
    out = tmp_path / "out"
    proc = run_command(["lm_eval", "--model", "hf", "--model_args", f"pretrained={tiny_model_dir},dtype=float32",
                        "--tasks", "wmdp,tofu_forget10", "--device", "cpu", "--batch_size", "8",
                        "--metadata", json.dumps({"data_dir": str(demo_data_dir)}), "--output_path", str(out)],
                       env={"HF_DATASETS_CACHE": str(cache)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (results_file,) = list(out.rglob("results_*.json"))
    data = json.loads(results_file.read_text())
    results = data["results"]
    for task in ("wmdp_bio", "wmdp_chem", "wmdp_cyber"):
        assert 0 <= results[task]["acc,none"] <= 1
    assert data["n-samples"]["wmdp_bio"]["effective"] == len(CONFIGS["wmdp-bio"])
    assert "forget_quality,none" in results["tofu_forget10"] and "model_utility,none" in results["tofu_forget10"]
    assert "acc,none" in data["groups"]["wmdp"]

    report = run_command(["unlearn", "report", str(out), "--names", "tiny"])
    assert report.returncode == 0, report.stderr
    assert "## wmdp_bio" in report.stdout and "| Accuracy (4 options, chance 0.25" in report.stdout
    assert "## tofu_forget10" in report.stdout and "| Forget Quality (KS p-value vs retain) |" in report.stdout
