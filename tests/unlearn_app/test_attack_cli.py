"""`unlearn attack quantize` / `relearn` from the command line on the tiny model (a few steps), run in this
process by the command's entry point (tests/fixtures/commands.py), which saves an interpreter start-up each."""

from __future__ import annotations

import json

import pytest

from fixtures.commands import run_unlearn_here


@pytest.fixture
def unlearn_attack(capsys):
    """``unlearn attack ARGS...``: its exit status and what it printed."""
    return lambda *args: run_unlearn_here(["attack", *args], capsys)


@pytest.mark.slow
def test_quantize_and_relearn_commands(tmp_path, tiny_model_dir, demo_data_dir, unlearn_attack):
    proc = unlearn_attack("quantize", "--model", tiny_model_dir, "--bits", 4, "--out", tmp_path / "q")
    assert proc.returncode == 0, proc.stderr
    assert "to int4" in proc.stdout and json.loads((tmp_path / "q" / "quantization.json").read_text())["bits"] == 4
    bad = unlearn_attack("quantize", "--model", tiny_model_dir, "--bits", 4, "--group-size", 7, "--out", tmp_path / "b")
    assert bad.returncode == 2 and "does not divide" in bad.stderr
    proc = unlearn_attack("relearn", "--model", tmp_path / "q", "--data", "demo", "--data-dir", demo_data_dir, "--forget",
                    "forget05", "--steps", 2, "--lr", "1e-3", "--seed", 1, "--out", tmp_path / "r", "--quiet")
    assert proc.returncode == 0, proc.stderr
    split = json.loads((tmp_path / "r" / "relearn_split.json").read_text())
    assert len(split["shown"]) == 6 and len(split["held_out"]) == 6
    result = json.loads((tmp_path / "r" / "relearn.json").read_text())
    assert 0 < result["held_out_prob_before"] < 1 and result["held_out_prob_after"] != result["held_out_prob_before"]
    assert "Held-out forget probability (6 items never shown)" in proc.stdout


@pytest.mark.slow
def test_relearn_on_a_related_corpus_records_what_it_used(tmp_path, tiny_model_dir, demo_data_dir, unlearn_attack):
    corpus = tmp_path / "related.csv"
    corpus.write_text("question,answer\nWho writes about harbours?,Talia Greyling writes about harbours.\n"
                      "Where does Talia Greyling live?,Talia Greyling lives by the sea.\n")
    proc = unlearn_attack("relearn", "--model", tiny_model_dir, "--data", "demo", "--data-dir", demo_data_dir, "--forget",
                    "forget05", "--relearn-data", corpus, "--steps", 2, "--lr", "1e-3", "--out", tmp_path / "all", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "Relearned on 2 question-answer rows of" in proc.stdout and "whole forget set (none shown) (12 items)" in proc.stdout
    result = json.loads((tmp_path / "all" / "relearn.json").read_text())
    assert result["measured"] == "whole forget set (none shown)" and result["relearn_fraction"] is None
    assert result["shown"] == [] and result["held_out"] == list(range(12)) and result["shown_prob_before"] is None
    assert result["relearn_data"]["path"] == str(corpus) and result["relearn_data"]["kind"] == "qa"
    assert result["relearn_data"]["rows"] == 2 and result["relearn_data"]["format"] == "csv"
    # with --relearn-fraction too: the same held-out items as the forget-set attack with that seed and fraction
    proc = unlearn_attack("relearn", "--model", tiny_model_dir, "--data", "demo", "--data-dir", demo_data_dir, "--forget",
                    "forget05", "--relearn-data", corpus, "--relearn-fraction", 0.5, "--seed", 1, "--steps", 1,
                    "--out", tmp_path / "half", "--quiet")
    assert proc.returncode == 0, proc.stderr
    half = json.loads((tmp_path / "half" / "relearn.json").read_text())
    from unlearn_methods.attacks.relearn import split_forget

    assert half["held_out"] == split_forget(12, 0.5, 1)[1] and half["shown"] == []
    assert half["measured"] == "held-out part of the forget set (none shown)" and half["relearn_fraction"] == 0.5


def test_relearn_data_errors_name_the_file_and_column(tmp_path, tiny_model_dir, unlearn_attack):
    corpus = tmp_path / "related.jsonl"
    corpus.write_text('{"passage": "Talia Greyling lives by the sea."}\n')
    proc = unlearn_attack("relearn", "--model", tiny_model_dir, "--relearn-data", corpus, "--out", tmp_path / "o")
    assert proc.returncode == 2
    assert f"error: {corpus} lacks the column 'text'" in proc.stderr and "it has the columns ['passage']" in proc.stderr
    assert "Traceback" not in proc.stderr
    proc = unlearn_attack("relearn", "--model", tiny_model_dir, "--relearn-data", tmp_path / "missing.parquet", "--out", tmp_path / "o")
    assert proc.returncode == 2 and "missing.parquet: no such file or folder" in proc.stderr
