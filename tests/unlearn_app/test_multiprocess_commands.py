"""Our evaluation commands under a launcher (``accelerate launch -m unlearn_app ci|margins``, two CPU processes over
gloo here): every process scores its share of lm-eval's requests, the main process gathers them and writes the
verdict and the outputs once, and they equal one process's (run in this process, which saves a start-up)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import yaml

from fixtures.commands import launch
from unlearn_app.cli import main

pytestmark = pytest.mark.slow

TASK = "tofu_forget01_likelihood"


def _scored(stderr: str) -> int:
    """The most answers one progress bar of the process that shows them scored (the main process: its share)."""
    return max(int(n) for n in re.findall(r"Scoring answer tokens: 100%\|[^|]*\| (\d+)/\1", stderr))


def test_unlearn_ci_on_two_processes_gives_the_verdict_of_one(tiny_model_dir, demo_data_dir, tmp_path, monkeypatch,
                                                              capsys):
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({
        "tasks": [TASK], "metadata": {"data_dir": str(demo_data_dir), "max_items_per_split": 3}, "batch_size": 1,
        "checks": [f"{TASK}/forget_prob >= 0", f"{TASK}/mia_min_k_auc <= 1", f"{TASK}/forget_truth_ratio > 0"]}))
    args = ["ci", "--model", str(tiny_model_dir), "--suite", str(suite)]
    monkeypatch.setenv("UNLEARN_CACHE_DIR", str(tmp_path / "cache1"))
    assert main([*args, "--out", str(tmp_path / "one")]) == 0
    one_stderr = capsys.readouterr().err
    two = launch(["unlearn", *args, "--out", str(tmp_path / "two")], env={"UNLEARN_CACHE_DIR": str(tmp_path / "cache2")})
    assert two.returncode == 0, two.stderr[-3000:]
    assert _scored(two.stderr) < _scored(one_stderr)  # each process scored its share
    assert two.stdout.count("pass ") == 3 and two.stdout.count("unlearn ci: ") == 1  # the verdict printed once
    first, second = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("one", "two"))
    assert second["passed"] and [c["passed"] for c in second["checks"]] == [c["passed"] for c in first["checks"]]
    assert second["results"][TASK].keys() == first["results"][TASK].keys()
    # results.json stores a NaN as null: the metrics that need a reference run (none given here) are null in both.
    needs_reference = {"forget_quality", "privleak", "mia_reference_auc"}
    assert {m for m, v in first["results"][TASK].items() if v is None} == needs_reference
    for metric, value in first["results"][TASK].items():
        if value is None:
            assert second["results"][TASK][metric] is None, metric
        else:
            assert second["results"][TASK][metric] == pytest.approx(value, rel=1e-5, abs=1e-6), metric
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == ["junit.xml", "lm_eval", "results.json", "summary.md"]
    assert len(list((tmp_path / "two" / "lm_eval").rglob("results_*.json"))) == 1  # written once
    assert len(list((tmp_path / "cache2").rglob("*.json"))) == len(list((tmp_path / "cache1").rglob("*.json")))


def test_a_bad_suite_on_two_processes_is_an_error_in_results_json(tiny_model_dir, tmp_path):
    """The launcher reduces every failure to exit 1, which also means "a check failed"; results.json tells them
    apart, as docs/ci.md says: the bad suite's one-line error is recorded (and each process exits 2, printing it once)."""
    suite = tmp_path / "suite.yaml"
    suite.write_text("tasks: [tofu_forget01_likelihood]\nchecks: 5\n")
    out = tmp_path / "ci"
    two = launch(["unlearn", "ci", "--model", str(tiny_model_dir), "--suite", str(suite), "--out", str(out)])
    assert two.returncode == 1, two.stderr[-3000:]
    record = json.loads((out / "results.json").read_text())
    assert record["error"].startswith(f"{suite}:2: checks") and "passed" not in record
    assert two.stderr.count(f"error: {record['error']}") == 1
    assert "<error" in (out / "junit.xml").read_text()
    bad = launch(["unlearn", "ci", "--model", str(tiny_model_dir), "--suite", str(suite), "--model-args", "{bad",
                  "--out", str(tmp_path / "args")])
    record = json.loads((tmp_path / "args" / "results.json").read_text())
    assert bad.returncode == 1 and record["error"].startswith("--model-args must be a JSON object")
    assert bad.stderr.count(f"error: {record['error']}") == 1


def test_unlearn_margins_on_two_processes_gives_the_margins_of_one(tiny_model_dir, tmp_path, capsys):
    data = tmp_path / "pairs.jsonl"
    rows = [{"prompt": f"Question: who wrote book {i}?\nAnswer:", "target": f" author {i} wrote it in {1900 + i}",
             "split": "forget" if i % 3 == 0 else "retain"} for i in range(7)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["margins", "--model", str(tiny_model_dir), "--data", str(data), "--batch-size", "1"]
    assert main([*args, "--out", str(tmp_path / "one.npy"), "--splits-out", str(tmp_path / "one.json")]) == 0
    one_stderr = capsys.readouterr().err
    two = launch(["unlearn", *args, "--out", str(tmp_path / "two.npy"), "--splits-out", str(tmp_path / "two.json"),
                  "--lm-eval-out", str(tmp_path / "lm_eval")])
    assert two.returncode == 0, two.stderr[-3000:]
    assert _scored(two.stderr) < _scored(one_stderr)
    assert two.stdout.count("7 margins") == 1  # reported once
    margins_one, margins_two = np.load(tmp_path / "one.npy"), np.load(tmp_path / "two.npy")
    assert margins_one.shape == (7,) and np.allclose(margins_two, margins_one, rtol=1e-5, atol=1e-6)
    assert json.loads((tmp_path / "two.json").read_text()) == json.loads((tmp_path / "one.json").read_text())
    assert len(list((tmp_path / "lm_eval").rglob("results_*.json"))) == 1
