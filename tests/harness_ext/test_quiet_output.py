"""Issue 12, items 11 and 12: our tasks cause no warnings about themselves, lm-eval's git lookup prints nothing
outside a repository, and input errors of our tasks end `lm_eval` with one line instead of a traceback."""

import json
import logging

import pytest

from harness_ext.input_errors import is_input_error
from harness_ext.lm_eval_patches import _git_commit_hash


def test_git_lookup_outside_a_repository_prints_nothing(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    assert _git_commit_hash() is None
    assert "fatal" not in capfd.readouterr().err


def test_building_our_task_logs_no_custom_kwargs_warning(demo_data_dir, caplog):
    from lm_eval.tasks import TaskManager

    from harness_ext import tasks_dir

    caplog.set_level(logging.WARNING)
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                     metadata={"data_dir": str(demo_data_dir), "pretrained": "m", "dtype": "float32"})
    task = tm.load(["tofu_forget01_rouge"])["tasks"]["tofu_forget01_rouge"]
    assert len(task.test_docs()) > 0
    assert "Custom kwargs" not in caplog.text


def test_input_errors_are_the_ones_our_code_raises(tmp_path):
    from unlearn_tasks.dataset_loader import DataError, load_config

    with pytest.raises(DataError) as ours:
        load_config("x/y", "c", data_dir=tmp_path)
    assert is_input_error(ours.value)
    with pytest.raises(ValueError) as theirs:
        int("x")
    assert not is_input_error(theirs.value)



def test_an_uncaught_input_error_is_one_line_and_exit_2_and_exit_handlers_run(tmp_path):
    """The hook ends the process with 2 (bad input, as the unlearn commands) after the exit handlers; any other
    exception keeps Python's traceback and 1."""
    import subprocess
    import sys

    script = ("import atexit; atexit.register(lambda: print('handlers ran'))\n"
              "from harness_ext.input_errors import install_input_error_hook; install_input_error_hook()\n"
              "from unlearn_tasks.dataset_loader import load_config\n"
              f"load_config('x/y', 'c', data_dir={str(tmp_path)!r}) if {{}} == {{}} else None\n")
    ours = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert ours.returncode == 2 and "handlers ran" in ours.stdout, ours.stderr[-2000:]
    assert ours.stderr.startswith("error: ") and "Traceback" not in ours.stderr
    theirs = subprocess.run([sys.executable, "-c", script.replace("load_config('x/y'", "int('x') or load_config('x/y'")],
                            capture_output=True, text=True, timeout=120)
    assert theirs.returncode == 1 and "Traceback" in theirs.stderr

@pytest.mark.slow
def test_lm_eval_run_outside_git_is_quiet_and_input_errors_are_one_line(bare_lm_eval_run, tiny_model_dir,
                                                                         demo_data_dir, tmp_path):
    import os
    from pathlib import Path

    from fixtures.commands import run_command

    proc, _ = bare_lm_eval_run  # tests/conftest.py: a bare lm_eval run started outside any git repository
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "not a git repository" not in proc.stderr and "Custom kwargs" not in proc.stderr
    repo = str(Path(__file__).resolve().parents[2])  # run outside any git repository, this checkout's code
    env = {"PYTHONPATH": os.pathsep.join([repo, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])}
    base = ["lm_eval", "--model", "hf", "--model_args", f"pretrained={tiny_model_dir},dtype=float32", "--device", "cpu",
            "--tasks", "tofu_forget01_likelihood", "--limit", "4"]
    proc = run_command(base + ["--metadata", json.dumps({"data_dir": str(demo_data_dir), "answer_scorring": "tofu"})],
                       env=env, cwd=tmp_path)
    assert proc.returncode == 2  # bad input, as the unlearn commands
    assert "error: TOFU task: unknown --metadata key(s) 'answer_scorring' (did you mean 'answer_scoring'?)" in proc.stderr
    assert "Traceback" not in proc.stderr
