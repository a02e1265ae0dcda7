"""Issue 12, item 6 and 11: `unlearn report` names every run it reads, keeps columns apart and names a bad file."""

import json

import pytest

from fixtures.commands import run_unlearn_here
from unlearn_app.cli import main


def _results(path, fq):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"results": {"tofu_forget01": {"forget_quality,none": fq, "model_utility,none": 0.5}}}))
    return path


def test_runs_in_folders_with_the_same_name_keep_their_own_columns(tmp_path, capsys):
    """`unlearn run --eval-tasks` writes ck/eval; ckA/eval and ckB/eval were both called "eval" and ckA was lost."""
    a = _results(tmp_path / "ckA" / "eval" / "m" / "results_2026-01-01T00-00-00.json", 0.01)
    b = _results(tmp_path / "ckB" / "eval" / "m" / "results_2026-01-01T00-00-00.json", 0.5)
    assert main(["report", str(tmp_path / "ckA" / "eval"), str(tmp_path / "ckB" / "eval"),
                 "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "| metric | ckA/eval | ckB/eval |" in out
    assert "| Forget Quality (KS p-value vs retain) | 0.0100 | 0.5000 |" in out
    assert f"- ckA/eval: {a}" in out and f"- ckB/eval: {b}" in out
    assert set(json.loads((tmp_path / "r.json").read_text())) == {"ckA/eval", "ckB/eval"}


def test_a_folder_with_several_runs_lists_each_one(tmp_path, capsys):
    _results(tmp_path / "evals" / "target" / "results_2026-01-01T00-00-00.json", 0.9)
    new = _results(tmp_path / "evals" / "target" / "results_2026-02-01T00-00-00.json", 0.01)
    retain = _results(tmp_path / "evals" / "retain" / "results_2026-01-01T00-00-00.json", 1.0)
    assert main(["report", str(tmp_path / "evals")]) == 0
    out = capsys.readouterr().out
    assert "| metric | evals/retain | evals/target |" in out
    assert "| 1.0000 | 0.0100 |" in out  # the newest run of target, by lm-eval's file-name timestamp
    assert f"- evals/retain: {retain}" in out and f"- evals/target: {new}" in out


def test_duplicate_names_are_refused(tmp_path, capsys):
    _results(tmp_path / "a" / "results_1.json", 0.1)
    _results(tmp_path / "b" / "results_1.json", 0.2)
    assert main(["report", str(tmp_path / "a"), str(tmp_path / "b"), "--names", "x,x"]) == 2
    assert "--names must be unique" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "a"), str(tmp_path / "a")]) == 2
    assert "more than once" in capsys.readouterr().err


@pytest.mark.parametrize("content, message", [("{not json", "is not valid JSON"), ("[1, 2]", "not an lm-eval results file")])
def test_corrupt_results_file_is_named_in_one_line(tmp_path, content, message, capsys):
    bad = tmp_path / "run" / "results_1.json"
    bad.parent.mkdir()
    bad.write_text(content)
    proc = run_unlearn_here(["report", str(tmp_path / "run")], capsys)
    assert proc.returncode == 2 and str(bad) in proc.stderr and message in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
