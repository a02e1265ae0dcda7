"""End to end (slow): the bare `lm_eval` command on a MUSE-layout folder; memorise, then `unlearn run --data
muse_news` lowers VerbMem on forget more than KnowMem on retain."""

import json
import sys

import pytest

from fixtures.commands import run_command
from fixtures.muse import memorise
from harness_ext.evaluate import run_lm_eval

pytestmark = pytest.mark.slow


def test_lm_eval_command_runs_muse_news_offline(muse_tiny_model_dir, muse_data_dir, tmp_path):
    proc = run_command(["lm_eval", "--model", "hf", "--model_args", f"pretrained={muse_tiny_model_dir},dtype=float32",
                        "--tasks", "muse_news", "--device", "cpu", "--batch_size", "8",
                        "--metadata", json.dumps({"data_dir": str(muse_data_dir)}), "--output_path", str(tmp_path)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    (results_file,) = list(tmp_path.rglob("results_*.json"))
    results = json.loads(results_file.read_text())["results"]["muse_news"]
    for metric in ("forget_verbmem", "forget_knowmem", "retain_knowmem", "mia_loss_auc", "mia_zlib_auc",
                   "mia_min_k_auc", "mia_min_k_plus_plus_auc", "privleak"):
        assert f"{metric},none" in results, metric
    assert "no reference given, so privleak is reported as NaN" in proc.stderr + proc.stdout


def test_unlearning_lowers_verbmem_on_forget_more_than_knowmem_on_retain(muse_tiny_model_dir, muse_data_dir, tmp_path):
    target = memorise(muse_tiny_model_dir, tmp_path / "target")
    proc = run_command(["unlearn", "run", "--method", "npo", "--model", str(target), "--data", "muse_news",
                        "--data-dir", str(muse_data_dir), "--forget", "forget", "--full", "--epochs", "10",
                        "--lr", "5e-4", "--batch-size", "4", "--out", str(tmp_path / "npo"), "--quiet"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the fixture's continuations are about 40 tokens: compare over 32 (MUSE's 128 suits its long passages)
    metadata = {"data_dir": str(muse_data_dir), "verbmem_max_tokens": 32}
    scores = {}
    for name in ("target", "npo"):
        res = run_lm_eval(tmp_path / name, ["muse_news_verbmem", "muse_news_knowmem"], tmp_path / f"eval_{name}",
                          metadata, batch_size=8)["results"]
        scores[name] = {"verbmem": res["muse_news_verbmem"]["forget_verbmem,none"],
                        "knowmem_retain": res["muse_news_knowmem"]["retain_knowmem,none"]}
    print(scores, file=sys.stderr)
    assert scores["target"]["verbmem"] > 0.7 and scores["target"]["knowmem_retain"] > 0.7  # memorised
    verbmem_drop = scores["target"]["verbmem"] - scores["npo"]["verbmem"]
    knowmem_drop = scores["target"]["knowmem_retain"] - scores["npo"]["knowmem_retain"]
    assert verbmem_drop > 0.1 and verbmem_drop > knowmem_drop + 0.1, scores
