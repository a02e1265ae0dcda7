"""`unlearn ci` on the tiny model through lm-eval, and the example GitHub Actions workflow's commands."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fixtures.commands import run_command
from harness_ext.provenance import file_sha256

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / "examples" / "github-actions" / "unlearn-ci.yml"
TASK = "tofu_forget01_likelihood"


def _suite(path: Path, data_dir: Path, checks: list[str]) -> Path:
    path.write_text(yaml.safe_dump({"tasks": [TASK], "metadata": {"data_dir": str(data_dir)}, "limit": 6,
                                    "batch_size": 8, "checks": checks}))
    return path


def _ci(model: Path, suite: Path, out: Path, cache: Path, *extra: str):
    return run_command(["unlearn", "ci", "--model", str(model), "--suite", str(suite), "--out", str(out), *extra],
                       env={"UNLEARN_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "1"})


@pytest.mark.slow
def test_ci_passes_fails_and_caches_on_the_tiny_model(tiny_model_dir, demo_data_dir, tmp_path):
    cache = tmp_path / "cache"
    model = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model)
    passing = _suite(tmp_path / "pass.yaml", demo_data_dir, [f"{TASK}/forget_prob >= 0", f"{TASK}/retain_prob <= 1"])
    proc = _ci(model, passing, tmp_path / "out1", cache)
    assert proc.returncode == 0, proc.stderr[-3000:]
    first = json.loads((tmp_path / "out1" / "results.json").read_text())
    assert first["passed"] and first["provenance"]["cache"]["hit"] is False
    prov = first["provenance"]["tasks"][TASK]
    assert prov["metric_modes"]["answer_scoring"] == "all" and prov["version"] == first["provenance"]["software"]["version"]
    forget_file = next(d for d in prov["data"] if d["config"] == "forget01_perturbed")
    assert forget_file["sha256"] == file_sha256(demo_data_dir / "forget01_perturbed.json")
    (lm_file,) = (tmp_path / "out1" / "lm_eval").rglob("results_*.json")
    assert json.loads(lm_file.read_text())["configs"][TASK]["provenance"]["data_fingerprint"] == prov["data_fingerprint"]

    # same checkpoint, another suite of checks: the numbers come from the cache, and one check fails
    failing = _suite(tmp_path / "fail.yaml", demo_data_dir, [f"{TASK}/forget_prob >= 0", f"{TASK}/forget_prob > 1"])
    proc = _ci(model, failing, tmp_path / "out2", cache)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "results from the cache" in proc.stdout
    assert f"FAIL {TASK}/forget_prob > 1: value" in proc.stdout and "bound 1" in proc.stdout
    second = json.loads((tmp_path / "out2" / "results.json").read_text())
    assert second["provenance"]["cache"]["hit"] is True and second["results"] == first["results"]
    assert [c["passed"] for c in second["checks"]] == [True, False]

    # changed weights: never the stale numbers
    from unlearn_methods.scaffolding.tiny_model import build_tiny_model
    from unlearn_methods.scaffolding.tofu_corpus import tokenizer_texts

    build_tiny_model(tokenizer_texts(0), model, seed=1)
    proc = _ci(model, passing, tmp_path / "out3", cache)
    assert proc.returncode == 0, proc.stderr[-3000:]
    third = json.loads((tmp_path / "out3" / "results.json").read_text())
    assert third["provenance"]["cache"]["hit"] is False
    assert third["model"]["revision"] != first["model"]["revision"]
    assert third["results"][TASK]["forget_prob"] != first["results"][TASK]["forget_prob"]


def _substitute(script: str, outputs: dict[str, dict[str, str]]) -> str:
    """GitHub's ``${{ steps.ID.outputs.NAME }}`` expressions, from the outputs the earlier steps wrote."""
    return re.sub(r"\$\{\{\s*steps\.(\w+)\.outputs\.(\w+)\s*\}\}", lambda m: outputs[m.group(1)][m.group(2)], script)


def _run_workflow(model: Path, suite: Path, out: Path, tmp: Path) -> tuple[dict[str, int], Path]:
    """Run the workflow's shell steps (all but the pip install) as GitHub would, with ``unlearn`` = this checkout."""
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["evaluate"]["steps"]
    outputs: dict[str, dict[str, str]] = {}
    codes = {}
    summary = tmp / "step_summary.md"
    for step in steps:
        if "run" not in step or step["run"].startswith("pip install"):
            continue
        gh_output = tmp / "gh_output"
        gh_output.write_text("")
        script = 'unlearn() { "$PY" -m unlearn_app "$@"; }\nset -e\n' + _substitute(step["run"], outputs)
        env = {**os.environ, "PY": sys.executable, "MODEL": str(model), "SUITE": str(suite), "OUT": str(out),
               "UNLEARN_CACHE_DIR": str(tmp / "cache"), "GITHUB_OUTPUT": str(gh_output),
               "GITHUB_STEP_SUMMARY": str(summary), "OMP_NUM_THREADS": "1",
               "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])}
        # cwd = a fresh folder, as a runner's workspace; PYTHONPATH keeps this checkout's code first
        proc = subprocess.run(["bash", "-c", script], env=env, cwd=tmp, capture_output=True, text=True, timeout=900)
        codes[step["name"]] = proc.returncode
        if step.get("id"):
            outputs[step["id"]] = dict(line.split("=", 1) for line in gh_output.read_text().splitlines() if "=" in line)
        if proc.returncode and step["name"] != "Fail when a check failed":
            raise AssertionError(f"step {step['name']!r} failed: {proc.stderr[-3000:]}")
    return codes, summary


@pytest.mark.slow
def test_example_workflow_commands_on_the_tiny_model(tiny_model_dir, demo_data_dir, tmp_path):
    passing = _suite(tmp_path / "pass.yaml", demo_data_dir, [f"{TASK}/forget_prob >= 0"])
    codes, summary = _run_workflow(tiny_model_dir, passing, tmp_path / "out", tmp_path)
    assert codes == {"Evaluate": 0, "HTML report": 0, "Fail when a check failed": 0}
    assert "all 1 checks passed" in summary.read_text()
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Checks" in html and f"{TASK}/forget_prob &gt;= 0" in html
    assert (tmp_path / "out" / "junit.xml").is_file()

    failing = _suite(tmp_path / "fail.yaml", demo_data_dir, [f"{TASK}/forget_prob > 1"])
    # a fresh output folder, as on a fresh runner (an existing one is never overwritten without --overwrite)
    codes, summary = _run_workflow(tiny_model_dir, failing, tmp_path / "out_fail", tmp_path)
    assert codes == {"Evaluate": 0, "HTML report": 0, "Fail when a check failed": 1}  # the job fails at the end
    assert "1 of 1 checks failed" in summary.read_text()
    assert "FAIL" in (tmp_path / "out_fail" / "report.html").read_text()


def test_example_suite_checks_name_real_metrics(tiny_model_dir, tmp_path):
    """The example suite's checks validate against the metric names of lm-eval's task objects."""
    from unlearn_app.ci.runner import build_tasks, task_metric_names
    from unlearn_app.ci.suite import load_suite, validate_checks
    from unlearn_methods.scaffolding.tofu_corpus import write_corpus
    from unlearn_methods.scaffolding.tofu_formats_corpus import write_formats

    data = write_corpus(tmp_path / "data")
    write_formats(data)
    suite = load_suite(REPO / "examples" / "github-actions" / "unlearn-suite.yaml")
    assert suite.tasks == ["tofu_forget10", "tofu_formats"] and len(suite.checks) == 5
    suite.reference, suite.metadata = None, {"data_dir": str(data)}
    _, tasks, groups = build_tasks(suite, {"pretrained": str(tiny_model_dir)})
    assert "tofu_mcqa" in groups["tofu_formats"]
    validate_checks(suite, {n: task_metric_names(t) for n, t in tasks.items()}, groups)


@pytest.mark.slow
def test_ci_on_a_lora_adapter_loads_its_base_model(tiny_model_dir, demo_data_dir, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    adapter = tmp_path / "adapter"
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"])).save_pretrained(adapter)
    assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == str(tiny_model_dir)
    suite = _suite(tmp_path / "s.yaml", demo_data_dir, [f"{TASK}/forget_prob >= 0"])
    proc = _ci(adapter, suite, tmp_path / "out", tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert "+base=local:" in record["model"]["revision"]  # adapter and base model both pinned
    (lm_file,) = (tmp_path / "out" / "lm_eval").rglob("results_*.json")
    model_args = json.loads(lm_file.read_text())["config"]["model_args"]
    assert model_args["peft"] == str(adapter) and model_args["pretrained"] == str(tiny_model_dir)


@pytest.mark.slow
def test_ci_builds_each_task_once(tiny_model_dir, demo_data_dir, tmp_path, monkeypatch):
    """The suite is validated on the task objects lm-eval then evaluates: one construction per task (was two)."""
    from unlearn_app.ci.runner import CiOptions, run_ci
    from unlearn_tasks.tofu.task import TofuTask

    built = []
    original = TofuTask.__init__

    def counting(self, config=None, **kwargs):
        original(self, config=config, **kwargs)
        built.append(self.config.task)

    monkeypatch.setattr(TofuTask, "__init__", counting)
    suite = _suite(tmp_path / "suite.yaml", demo_data_dir, [f"{TASK}/forget_prob >= 0"])
    code = run_ci(CiOptions(suite=str(suite), out=str(tmp_path / "out"), model=str(tiny_model_dir), limit=2,
                            no_cache=True, cache_dir=str(tmp_path / "cache")))
    assert code == 0
    assert built == [TASK]
    assert json.loads((tmp_path / "out" / "results.json").read_text())["results"][TASK]["forget_prob"] >= 0
