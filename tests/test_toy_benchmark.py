"""Issue 25, item 5: a benchmark declares itself once. A toy benchmark in a temporary folder (a task YAML and a
package declaring its options, report rows and metric directions, installed the way ``pip install`` installs it:
a ``*.dist-info`` folder with an entry point of ``lm_eval_unlearning.benchmarks``) runs through ``lm_eval``,
``unlearn report`` and ``unlearn ci`` without any other file of the project being edited."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fixtures.commands import run_command

REPO = Path(__file__).resolve().parents[1]
TOY = Path(__file__).resolve().parent / "fixtures" / "toy_bench"
TASK = "toy_forget"


def install_toy(site: Path) -> dict[str, str]:
    """Copy the toy package into ``site`` with the entry point pip would write; the environment that sees it."""
    shutil.copytree(TOY, site / "toy_bench", ignore=shutil.ignore_patterns("__pycache__"))
    dist = site / "toy_bench-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-bench\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[lm_eval_unlearning.benchmarks]\ntoy = toy_bench.benchmark\n")
    return {"PYTHONPATH": os.pathsep.join([str(REPO), str(site)]), "OMP_NUM_THREADS": "1"}


def _python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env})


def test_the_toy_declares_its_options_rows_and_directions(tmp_path):
    """Found through its entry point: its keys join the union every task accepts, and its own check names them."""
    env = install_toy(tmp_path / "site")
    broken = tmp_path / "site" / "broken_bench-0.1.dist-info"  # a plugin whose module is missing: skipped, named
    broken.mkdir()
    (broken / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-bench\nVersion: 0.1\n")
    (broken / "entry_points.txt").write_text("[lm_eval_unlearning.benchmarks]\nbroken = no_such_bench.benchmark\n")
    toy_dir = str((tmp_path / "site" / "toy_bench").resolve())
    code = (
        f"from harness_ext.plugins import include_paths\nassert include_paths()[1:] == [{toy_dir!r}]\n"
        "from unlearn_tasks.benchmarks import benchmarks\n"
        "from unlearn_tasks.metadata import benchmark_keys\n"
        "from unlearn_tasks.tofu.options import TofuOptions\n"
        "from unlearn_app.reports.tables import rows_for_task\n"
        "from toy_bench.benchmark import ToyOptions\n"
        "assert 'toy' in benchmarks() and 'toy_per_char' in benchmark_keys()\n"
        "TofuOptions.from_metadata({'toy_per_char': True})  # --metadata reaches every task of a run\n"
        "assert ToyOptions.from_metadata({'toy_per_char': True, 'pretrained': 'm'}).toy_per_char is True\n"
        "for bad in ({'toy_per_chr': True}, {'toy_per_char': 'yes'}):\n"
        "    try:\n        ToyOptions.from_metadata(bad)\n"
        "    except ValueError as e:\n        print(e)\n"
        "print(rows_for_task('toy_forget'))\n"
    )
    done = _python(code, env)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0].startswith("toy task: unknown --metadata key(s) 'toy_per_chr' (did you mean 'toy_per_char'?)")
    assert lines[1] == ("toy task option: toy_per_char must be true or false, got 'yes' "
                        "(check --metadata / the task YAML).")
    assert lines[2] == str([("forget_logprob", "Forget log-probability"), ("retain_logprob", "Retain log-probability"),
                            ("forget_retain_gap", "Gap (forget - retain)")])
    assert "broken = no_such_bench.benchmark is skipped" in done.stderr


@pytest.mark.slow
def test_the_toy_runs_through_lm_eval_report_and_ci(tiny_model_dir, tmp_path):
    env = install_toy(tmp_path / "site")
    model_args = f"pretrained={tiny_model_dir},dtype=float32"

    # 1. lm_eval finds the task through the entry point (no --include_path) and reads the toy's option
    proc = run_command(["lm_eval", "--model", "hf", "--model_args", model_args, "--tasks", TASK, "--device", "cpu",
                        "--batch_size", "4", "--metadata", '{"toy_per_char": true}', "--output_path",
                        str(tmp_path / "eval"), "--log_samples"], env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (results_file,) = (tmp_path / "eval").rglob("results_*.json")
    results = json.loads(results_file.read_text())
    metrics = {k.split(",")[0]: v for k, v in results["results"][TASK].items() if k.endswith(",none")}
    (samples_file,) = (tmp_path / "eval").rglob(f"samples_{TASK}_*.jsonl")
    samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
    per_char = {s["doc"]["split"]: [] for s in samples}
    for s in samples:  # recomputed from lm-eval's own log of each request: log-probability per answer character
        per_char[s["doc"]["split"]].append(float(s["resps"][0][0][0]) / len(s["doc"]["answer"]))
    forget, retain = (sum(v) / len(v) for v in (per_char["forget"], per_char["retain"]))
    assert metrics["forget_logprob"] == pytest.approx(forget) and metrics["retain_logprob"] == pytest.approx(retain)
    assert metrics["forget_retain_gap"] == pytest.approx(forget - retain)
    assert results["higher_is_better"][TASK] == {"forget_logprob": False, "retain_logprob": True,
                                                 "forget_retain_gap": False}

    # 2. unlearn report shows the toy's rows, in its declared order (not alphabetical), under its labels
    proc = run_command(["unlearn", "report", str(tmp_path / "eval")], env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = proc.stdout[proc.stdout.index(f"## {TASK}"):]
    labels = [line.split("|")[1].strip() for line in table.splitlines()[4:7]]
    assert labels == ["Forget log-probability", "Retain log-probability", "Gap (forget - retain)"], table

    # 3. unlearn ci evaluates the toy on the model and gates on its metrics
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({"tasks": [TASK], "metadata": {"toy_per_char": True}, "batch_size": 4,
                                     "checks": [f"{TASK}/retain_logprob < 0", f"{TASK}/forget_retain_gap > 100"]}))
    proc = run_command(["unlearn", "ci", "--model", str(tiny_model_dir), "--suite", str(suite), "--out",
                        str(tmp_path / "ci"), "--no-cache"], env={**env, "UNLEARN_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 1, proc.stderr[-3000:]  # the second check is false: the gate fails
    record = json.loads((tmp_path / "ci" / "results.json").read_text())
    assert [c["passed"] for c in record["checks"]] == [True, False]
    assert record["results"][TASK]["forget_retain_gap"] == pytest.approx(forget - retain)
