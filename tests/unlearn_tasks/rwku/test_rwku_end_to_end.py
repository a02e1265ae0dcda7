"""End to end (slow): the bare `lm_eval` command runs RWKU on SmolLM2 with the chat template, and every reported
metric is recomputed from lm-eval's logged samples (the model's answers and token log-probabilities)."""

import ast
import json
import zlib

import numpy as np
import pytest

from fixtures.commands import run_command
from fixtures.rwku import TARGETS, write_rwku_corpus
from unlearn_tasks.rwku.scoring import release_rouge_l_recall

pytestmark = pytest.mark.slow


def _samples(folder, task):
    (path,) = list(folder.rglob(f"samples_{task}_*.jsonl"))
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_lm_eval_runs_rwku_and_its_metrics_follow_from_the_samples(smollm2_dir, tmp_path):
    data = write_rwku_corpus(tmp_path / "rwku", "hub")
    metadata = {"data_dir": str(data), "rwku_targets": "1-2"}
    proc = run_command(["lm_eval", "--model", "hf", "--model_args", f"pretrained={smollm2_dir},dtype=float32",
                        "--tasks", "rwku_forget_level3,rwku_mia", "--device", "cpu", "--batch_size", "8",
                        "--apply_chat_template", "--log_samples", "--metadata", json.dumps(metadata),
                        "--output_path", str(tmp_path / "out")])
    assert proc.returncode == 0, proc.stderr[-3000:]
    (results_file,) = list((tmp_path / "out").rglob("results_*.json"))
    results = json.loads(results_file.read_text())

    level3 = results["results"]["rwku_forget_level3"]
    samples = _samples(tmp_path / "out", "rwku_forget_level3")
    assert len(samples) == 6 and {s["doc"]["subject"] for s in samples} == set(TARGETS[:2])
    scores = {}
    for s in samples:
        answer = s["resps"][0][0].strip() or "NOANSWER"
        scores.setdefault(s["doc"]["type_slug"], []).append(release_rouge_l_recall(s["doc"]["answer"], answer))
    assert level3["forget_level3,none"] == pytest.approx(np.mean([v for vs in scores.values() for v in vs]))
    for slug, values in scores.items():
        assert level3[f"forget_level3_{slug},none"] == pytest.approx(np.mean(values))
    per_target = results["configs"]["rwku_forget_level3"]["rwku_per_target"]
    assert set(per_target) == set(TARGETS[:2]) and all(v["n"] == 3 for v in per_target.values())

    mia = results["results"]["rwku_mia"]
    by_set = {"mia_forget": [], "mia_retain": []}
    for s in _samples(tmp_path / "out", "rwku_mia"):
        response = s["resps"][0][0]  # lm-eval logs the response dict as its repr
        lps = (ast.literal_eval(response) if isinstance(response, str) else response)["logprobs"]
        by_set[s["doc"]["set"]].append((np.mean(lps), np.mean(lps) / len(zlib.compress(s["doc"]["text"].encode()))))
    assert len(by_set["mia_forget"]) == 4 and len(by_set["mia_retain"]) == 2
    for name, values in by_set.items():
        short = name.split("_")[1]
        assert mia[f"mia_{short}_loss,none"] == pytest.approx(np.mean([v[0] for v in values]))
        assert mia[f"mia_{short}_zlib,none"] == pytest.approx(np.mean([v[1] for v in values]))
    # AUROC over loss-like scores, forget = 0, retain = 1: the share of (forget, retain) pairs where the retain
    # text has the higher loss
    pairs = [(f[0], r[0]) for f in by_set["mia_forget"] for r in by_set["mia_retain"]]
    expected = np.mean([1.0 if -r > -f else 0.5 if r == f else 0.0 for f, r in pairs])
    assert mia["mia_loss_auc,none"] == pytest.approx(expected)
