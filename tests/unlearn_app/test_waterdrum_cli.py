"""`unlearn watermark`, `unlearn verify` and `unlearn waterdrum report` through the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fixtures import waterdrum as wf
from unlearn_app.cli import main

REPO = Path(__file__).resolve().parents[2]


def _unlearn(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "unlearn_app", *args], capture_output=True, text=True,
                          cwd=REPO, env=full_env, timeout=300)


def test_verify_prints_and_writes_scores(waterdrum_data, tmp_path):
    data = waterdrum_data["data"] / "forget_01" / "full.jsonl"
    out = tmp_path / "scores.json"
    proc = _unlearn("verify", "--ids", "0-4", "--in", str(data), "--tokenizer", str(waterdrum_data["model"]), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1].split("\t") == ["line", "tokens", "id 0", "id 1", "id 2", "id 3", "id 4", "best"]
    assert len(lines) == 2 + 16 + 1 and lines[-1].startswith("all\t")
    report = json.loads(out.read_text())
    assert report["ids"] == [0, 1, 2, 3, 4] and report["vocab_size"] == 1024 and len(report["texts"]) == 16
    best = [t["best_id"] for t in report["texts"]]
    owners = [i // wf.AX_TEXTS_PER_OWNER for i in range(16)]
    assert sum(b == o for b, o in zip(best, owners)) >= 14  # each owner's texts carry the owner's id
    own = np.mean([t["scores"][str(o)] for t, o in zip(report["texts"], owners)])
    assert own > 0.3 and abs(report["pooled"]["4"]) < 0.1  # id 4 owns nothing


def test_verify_input_errors(waterdrum_data, tmp_path, capsys, monkeypatch):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"content": "no text field"}\n')
    assert main(["verify", "--ids", "0-3", "--in", str(bad), "--tokenizer", str(waterdrum_data["model"])]) == 2
    assert "line 2 has no 'text' field" in capsys.readouterr().err
    good = tmp_path / "good.jsonl"
    good.write_text('{"text": "some words here"}\n')
    assert main(["verify", "--ids", "3-1", "--in", str(good), "--tokenizer", str(waterdrum_data["model"])]) == 2
    assert "descending range" in capsys.readouterr().err
    assert main(["verify", "--ids", "a,b", "--in", str(good), "--tokenizer", str(waterdrum_data["model"])]) == 2
    assert "bad owner id item" in capsys.readouterr().err
    # No Llama-3 tokenizer anywhere (no llama-models package, offline, not cached): say what to install.
    from unlearn_tasks.waterdrum import tokenizer

    monkeypatch.setitem(sys.modules, "llama_models", None)
    monkeypatch.setitem(sys.modules, "llama_models.llama3.tokenizer", None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty_hf_home"))
    monkeypatch.setattr(tokenizer, "_hf_tokenizer", lambda name, local_only: (_ for _ in ()).throw(OSError("not cached")))
    tokenizer.load_tokenizer.cache_clear()
    try:
        assert main(["verify", "--ids", "0", "--in", str(good)]) == 2
    finally:
        tokenizer.load_tokenizer.cache_clear()
    assert "lm-eval-unlearning[waterdrum]" in capsys.readouterr().err


def test_watermark_command(tiny_model_dir, tmp_path):
    src = tmp_path / "data.jsonl"
    src.write_text("".join(json.dumps({"text": t, "source": i}) + "\n" for i, t in enumerate(
        ["The author was born in a small town.", "Her first novel was about the sea.", "He writes poems."])))
    out = tmp_path / "wm.jsonl"
    proc = _unlearn("watermark", "--id", "3", "--kappa", "2", "--k-p", "1", "--model", str(tiny_model_dir),
                    "--in", str(src), "--out", str(out), "--sample", "--max-new-tokens", "40", "--seed", "0",
                    "--device", "cpu")
    assert proc.returncode == 0, proc.stderr
    assert "Watermarking (id 3)" in proc.stderr  # the progress bar
    assert "self-check" in proc.stdout
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [r["source"] for r in rows] == [0, 1, 2] and all(r["watermark_id"] == 3 for r in rows)
    assert rows[0]["text_original"] == "The author was born in a small town."
    from unlearn_tasks.waterdrum.verify import verify_texts

    scores, lengths = verify_texts([r["text"] for r in rows], [3, 4], tokenizer=str(tiny_model_dir), return_lengths=True)
    pooled = (scores[:, :, 0] * lengths[:, None]).sum(0) / lengths.sum()
    assert pooled[0] > 0.15 and pooled[0] > pooled[1] + 0.1  # bytes re-tokenise differently: weaker than 0.7
    assert main(["watermark", "--id", "3", "--model", str(tiny_model_dir), "--in", str(tmp_path / "missing.jsonl"),
                 "--out", str(out)]) == 2


@pytest.mark.slow
def test_waterdrum_report(waterdrum_data, tiny_model_dir, tmp_path):
    trained, _ = wf.lm_eval_run(str(waterdrum_data["model"]), str(waterdrum_data["data"]), ("waterdrum_ax", "waterdrum_tofu"))
    untrained, _ = wf.lm_eval_run(str(tiny_model_dir), str(waterdrum_data["data"]), ("waterdrum_ax",))
    proc = _unlearn("waterdrum", "report", str(trained), str(untrained), "--names", "original,retrained",
                    "--original", "original", "--retrained", "retrained", "--fraction", "original=1",
                    "--fraction", "retrained=0", "--task", "waterdrum_ax", "--out", str(tmp_path / "rep"))
    assert proc.returncode == 0, proc.stderr
    assert "| original | original | 1.0000 |" in proc.stdout and "D2 calibration R^2" in proc.stdout
    report = json.loads((tmp_path / "rep" / "waterdrum_report.json").read_text())
    original, retrained = report["runs"]
    assert original["forget_scaled"] == pytest.approx(1.0) and retrained["forget_scaled"] < 0.5
    assert report["calibration"]["n"] == 2 and report["calibration"]["r2"] > 0.5
    assert 0 <= report["separability_auroc"] <= 1
    assert set(report["baselines"]) == {"rougeL_recall", "knowmem", "min_k"}
    for metric in ("rougeL_recall", "min_k"):  # these baselines get their own D1 / D2
        rep = report["baselines"][metric]
        assert 0 <= rep["separability_auroc"] <= 1 and rep["calibration"]["n"] == 2, (metric, rep)
        assert f"{metric}: D1 AUROC {rep['separability_auroc']:.4f}" in proc.stdout
    # the tiny original model answers no KnowMem question (KnowMem 0): nothing to scale by, said as such
    assert report["baselines"]["knowmem"] == {"error": "cannot scale by an original strength of 0.0"}
    assert "knowmem: cannot scale by an original strength of 0.0" in proc.stdout
    assert (tmp_path / "rep" / "waterdrum_report.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_report_input_errors(waterdrum_data, tmp_path, capsys):
    trained, _ = wf.lm_eval_run(str(waterdrum_data["model"]), str(waterdrum_data["data"]), ("waterdrum_ax", "waterdrum_tofu"))
    assert main(["waterdrum", "report", str(trained), "--original", "x"]) == 2
    assert "not a run" in capsys.readouterr().err
    assert main(["waterdrum", "report", str(trained), "--fraction", "half"]) == 2
    assert "NAME=FRACTION" in capsys.readouterr().err
    assert main(["waterdrum", "report", str(trained), "--names", "a", "--original", "a"]) == 2
    assert "--task" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["waterdrum", "report", str(tmp_path / "empty")]) == 2
    assert "results_" in capsys.readouterr().err
