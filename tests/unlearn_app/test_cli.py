"""The user's entry points as a user runs them: the bare ``lm_eval`` command and ``unlearn``."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures.commands import run_command
from harness_ext import tasks_dir

ROOT = Path(__file__).resolve().parents[2]


def _run(args, env=None, timeout=600):
    if args[0] == sys.executable:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    return run_command(args, env=env, timeout=timeout)


@pytest.mark.slow
def test_bare_lm_eval_finds_and_runs_our_task(bare_lm_eval_run):
    proc, out = bare_lm_eval_run  # tests/conftest.py: `lm_eval --tasks tofu_forget01_likelihood ...` on the tiny model
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "forget_truth_ratio" in proc.stdout and "mia_min_k_auc" in proc.stdout
    (results,) = list(out.rglob("results_*.json"))
    assert "forget_prob,none" in json.loads(results.read_text())["results"]["tofu_forget01_likelihood"]


def test_switching_the_hook_off_hides_our_tasks(tiny_model_dir):
    code = "from lm_eval.tasks import TaskManager; print('tofu_forget10' in TaskManager(include_defaults=False).all_tasks)"
    on = _run([sys.executable, "-c", code])
    off = _run([sys.executable, "-c", code], env={"UNLEARN_LMEVAL_AUTOLOAD": "0"})
    assert on.stdout.strip() == "True", on.stderr[-2000:]
    assert off.stdout.strip() == "False", off.stderr[-2000:]


@pytest.fixture(scope="module")
def lm_eval_ls_run(background):
    """`lm-eval ls tasks`, started in the background as the session starts (tests/conftest.py): it indexes every
    lm-eval task on one thread."""
    return background.result("lm_eval_ls", timeout=600)


def test_lm_eval_ls_lists_our_tasks(lm_eval_ls_run):
    proc = lm_eval_ls_run
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "tofu_forget10" in proc.stdout


def test_unlearn_help_and_tasks_dir():
    proc = _run(["unlearn", "--help"])
    assert proc.returncode == 0 and "demo" in proc.stdout and "tasks-dir" in proc.stdout
    proc = _run(["unlearn", "tasks-dir"])
    assert proc.stdout.strip() == str(tasks_dir())


@pytest.fixture(scope="module")
def demo_run(background):
    """`unlearn demo --workdir FOLDER --quiet` once for this module's tests: its folder and its process (started in
    the background as the session starts, tests/conftest.py: the demo runs on one thread)."""
    return background.folder("demo"), background.result("demo", timeout=3600)


@pytest.mark.slow
def test_unlearn_demo_shows_forgetting_numbers(demo_run):
    tmp_path, proc = demo_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the terminal shows stages and tables: the Trainer's loss lines go to a file, and the retain run (the reference
    # the demo supplies) is not warned about as having none
    assert "'loss'" not in proc.stdout and "'loss'" in (tmp_path / "training_log.txt").read_text()
    assert "no reference log given" not in proc.stderr
    results = json.loads((tmp_path / "results.json").read_text())["models"]
    target, retain = results["target"], results["retain"]
    assert target["forget_quality"] < 0.05  # the target is distinguishable from the retain model
    assert target["forget_prob"] > retain["forget_prob"] + 0.3  # it knows the forget facts, retain does not
    assert target["mia_min_k_auc"] > 0.9 and abs(retain["mia_min_k_auc"] - 0.5) < 0.25
    assert target["model_utility"] > 0.5 and retain["model_utility"] > 0.5
    for method in ("graddiff", "npo"):  # forgetting happens: forget numbers fall far more than retain numbers
        m = results[method]
        forget_drop = target["forget_prob"] - m["forget_prob"]
        assert forget_drop > 0.4 and target["forget_rougeL_recall"] - m["forget_rougeL_recall"] > 0.2
        assert target["retain_prob"] - m["retain_prob"] < 0.75 * forget_drop
    report = (tmp_path / "report.md").read_text()
    assert "Forget Quality" in report and "| metric | target | graddiff | npo | retain |" in report
    formats = json.loads((tmp_path / "results.json").read_text())["formats"]
    cloze = {m: formats[m]["tofu_cloze/forget_retain_gap"] for m in formats}
    assert abs(cloze["target"]) < 0.05 and cloze["retain"] < -0.5  # the target knows both; retain never saw forget
    assert "| Cloze | forget probability |" in report
    deep = json.loads((tmp_path / "results.json").read_text())["deep_unlearning"]["models"]
    assert set(deep) == {"knows all", "graddiff, target fact", "graddiff, minimal set"}
    # The whole minimal set gone: the target fact is not derivable (one forget fact per step, see docs/testing.md).
    assert deep["graddiff, minimal set"]["success_du"] == 1.0
    assert "## Deep unlearning" in report
    attack = json.loads((tmp_path / "results.json").read_text())["relearn_attack"]  # run last, its own seed
    assert attack["model"] == "npo" and attack["shown"] == attack["held_out"] == 12
    assert attack["after"] > attack["before"] + 0.1 and attack["retain"] < attack["after"] < attack["target"]
    assert f"| Forget probability | {attack['target']:.4f} | {attack['before']:.4f} | {attack['after']:.4f} |" in report
    assert "Forget Quality" in proc.stdout
    assert (tmp_path / "forget_quality_vs_utility.png").is_file()


@pytest.mark.slow
@pytest.mark.optional
def test_unlearn_demo_prints_the_table_of_its_page(demo_run):
    """docs/demo.md's TOFU table and the cloze numbers of its text are what the demo prints (one thread,
    deterministic algorithms: the same on every machine whose CPU runs torch's same kernels; the page says so)."""
    tmp_path, proc = demo_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    page = (ROOT / "docs" / "demo.md").read_text()
    rows = re.findall(r"^\| [A-Z][^|]*\|(?: [^|]* \|){4}$", page, flags=re.M)
    assert len(rows) == 7
    report = (tmp_path / "report.md").read_text()
    for row in rows:
        assert row in report.splitlines(), row
    formats = json.loads((tmp_path / "results.json").read_text())["formats"]
    cloze = {m: round(formats[m]["tofu_cloze/forget_prob"], 2) for m in ("npo", "target", "retain")}
    said = re.search(r"as cloze questions keep ([\d.]+) \(target ([\d.]+), retain ([\d.]+)\)", page)
    assert [float(x) for x in said.groups()] == [cloze["npo"], cloze["target"], cloze["retain"]]


def test_unlearn_report_compares_runs_with_table_json_and_plot(tmp_path):
    for name, fq in (("a", 0.01), ("b", 0.5)):
        folder = tmp_path / name / "model"
        folder.mkdir(parents=True)
        results = {"results": {"tofu_forget10": {"alias": "tofu_forget10", "forget_quality,none": fq,
                                                 "forget_quality_stderr,none": "N/A", "model_utility,none": 0.6}}}
        (folder / "results_2026-01-01.json").write_text(json.dumps(results))
    out = tmp_path / "r.md"
    proc = _run(["unlearn", "report", str(tmp_path / "a"), str(tmp_path / "b"), "--names", "GA,NPO",
                 "--out", str(out), "--json", str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png")])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "| metric | GA | NPO |" in out.read_text()
    assert "| Forget Quality (KS p-value vs retain) | 0.0100 | 0.5000 |" in out.read_text()
    assert json.loads((tmp_path / "r.json").read_text())["NPO"]["tofu_forget10"]["forget_quality"] == 0.5
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    proc = _run(["unlearn", "report", str(tmp_path / "missing")])
    assert proc.returncode == 2 and f"{tmp_path / 'missing'} does not exist" in proc.stderr
    (tmp_path / "empty").mkdir()
    proc = _run(["unlearn", "report", str(tmp_path / "empty")])
    assert proc.returncode == 2 and "No lm-eval results" in proc.stderr
