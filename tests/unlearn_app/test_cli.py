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
    # while it starts, it says what it does (harness_ext.startup), before lm-eval's own first line but its reading
    # of the command line (the --limit warning): its evaluator loading, the task index, our task's documents
    lines = proc.stderr.splitlines()

    def first(text: str) -> int:
        return next(n for n, line in enumerate(lines) if text in line)

    loading = first("[lm_eval_unlearning:")
    assert "Loading torch, transformers and lm-eval's evaluator" in lines[loading]
    assert all("--limit" in line for line in lines[:loading]), lines[:loading]
    assert loading < first("Indexing lm-eval's tasks") < first("] Indexed ") < first("Selected Tasks")
    assert first("Initializing hf model") < first("tofu_forget01_likelihood: loading its documents") < first("Running ")
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
def test_the_demo_outputs_make_a_fully_verified_submission(demo_run, tmp_path, capsys):
    """The demo's evaluations log their samples: its NPO model and run, submitted against its retain run, have every
    number recomputed from per-item values (Forget Quality, PrivLeak and the reference MIA against the retain run's),
    none unverified, and the board's validation agrees (docs/demo.md)."""
    from unlearn_app.cli import main

    out, proc = demo_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    board = tmp_path / "board"
    assert main(["submit", str(out / "models" / "npo"), str(out / "eval" / "npo"), "--reference",
                 str(out / "eval" / "retain"), "--to", str(board)]) == 0
    said = re.search(r"^submission (npo-npo-\w+): validated; (\d+) aggregate\(s\) recomputed from per-item values, "
                     r"0 unverified$", capsys.readouterr().out, re.M)
    assert said and int(said.group(2)) > 40  # the TOFU task's and the seven format tasks' numbers
    assert main(["leaderboard", "validate", str(board)]) == 0
    assert re.search(rf"^validated {said.group(1)}", capsys.readouterr().out, re.M)


def this_cpu() -> tuple[str, str]:
    """The CPU's vendor (``vendor_id`` in /proc/cpuinfo) and the kernels torch runs on it (its CPU capability)."""
    import torch

    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    vendor = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("vendor_id")), "")
    return vendor, torch.backends.cpu.get_cpu_capability()


def page_tables(page: str) -> dict[str, tuple[list[str], list[float]]]:
    """docs/demo.md's tables, each after a ``<!-- demo-table: VENDOR [CAPABILITY] -->`` comment: its 7 rows and
    the cloze numbers (NPO, target, retain) of the sentence that follows it."""
    blocks = re.split(r"^<!-- demo-table: ([^>]*?) -->$", page, flags=re.M)
    tables = {}
    for machine, block in zip(blocks[1::2], blocks[2::2]):
        rows = re.findall(r"^\| [A-Z][^|]*\|(?: [^|]* \|){4}$", block, flags=re.M)
        said = re.search(r"cloze questions keep ([\d.]+) \(target ([\d.]+), retain ([\d.]+)\)", block)
        tables[machine] = rows, [float(x) for x in said.groups()]
    return tables


def test_the_page_has_a_whole_table_for_each_machine():
    tables = page_tables((ROOT / "docs" / "demo.md").read_text())
    assert set(tables) == {"GenuineIntel AVX512", "AuthenticAMD", "AuthenticAMD AVX512"}
    assert all(len(rows) == 7 and len(cloze) == 3 for rows, cloze in tables.values())
    assert len({tuple(rows) for rows, _ in tables.values()}) == 3  # each machine's own numbers


@pytest.mark.slow
@pytest.mark.optional
def test_unlearn_demo_prints_the_table_of_its_page(demo_run):
    """docs/demo.md's TOFU table for this CPU and the cloze numbers of its text are what the demo prints (one thread,
    deterministic algorithms: the same on every machine whose CPU runs torch's same kernels; the page gives a table
    per CPU vendor and torch CPU capability it was run on, and says so)."""
    tmp_path, proc = demo_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    vendor, capability = this_cpu()
    tables = page_tables((ROOT / "docs" / "demo.md").read_text())
    # the table of this vendor and torch capability, else the vendor's table that names no capability
    mine = sorted((m for m in tables if m.split()[0] == vendor and m.split()[1:] in ([], [capability])),
                  key=lambda m: -len(m.split()))
    if not mine:
        pytest.skip(f"docs/demo.md has no demo table for this CPU ({vendor}, torch capability {capability})")
    rows, said = tables[mine[0]]
    report = (tmp_path / "report.md").read_text()
    for row in rows:
        assert row in report.splitlines(), row
    formats = json.loads((tmp_path / "results.json").read_text())["formats"]
    assert said == [round(formats[m]["tofu_cloze/forget_prob"], 2) for m in ("npo", "target", "retain")]


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
