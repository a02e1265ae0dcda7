"""`unlearn attack quantize` / `relearn` from the command line on the tiny model (a few steps)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def _unlearn(*args):
    return subprocess.run([sys.executable, "-m", "unlearn_app", "attack", *map(str, args)], capture_output=True,
                          text=True, env=os.environ.copy())


@pytest.mark.slow
def test_quantize_and_relearn_commands(tmp_path, tiny_model_dir, demo_data_dir):
    proc = _unlearn("quantize", "--model", tiny_model_dir, "--bits", 4, "--out", tmp_path / "q")
    assert proc.returncode == 0, proc.stderr
    assert "to int4" in proc.stdout and json.loads((tmp_path / "q" / "quantization.json").read_text())["bits"] == 4
    bad = _unlearn("quantize", "--model", tiny_model_dir, "--bits", 4, "--group-size", 7, "--out", tmp_path / "b")
    assert bad.returncode == 2 and "does not divide" in bad.stderr
    proc = _unlearn("relearn", "--model", tmp_path / "q", "--data", "demo", "--data-dir", demo_data_dir, "--forget",
                    "forget05", "--steps", 2, "--lr", "1e-3", "--seed", 1, "--out", tmp_path / "r", "--quiet")
    assert proc.returncode == 0, proc.stderr
    split = json.loads((tmp_path / "r" / "relearn_split.json").read_text())
    assert len(split["shown"]) == 6 and len(split["held_out"]) == 6
    result = json.loads((tmp_path / "r" / "relearn.json").read_text())
    assert 0 < result["held_out_prob_before"] < 1 and result["held_out_prob_after"] != result["held_out_prob_before"]
    assert "Held-out forget probability (6 items never shown)" in proc.stdout
