"""lm-eval in process on a model already in memory (``live_hf_lm``), as evaluation during unlearning runs it."""

import math

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import harness_ext.lm_eval_patches as patches
from harness_ext.evaluate import evaluate_lm, live_hf_lm, run_lm_eval, unknown_tasks
from harness_ext.results import task_metrics

TASK = "tofu_forget01_likelihood"


@pytest.fixture(scope="module")
def original_run(tmp_path_factory, tiny_model_dir, demo_data_dir):
    """The tiny model's folder evaluated with ``log_samples`` (the results and the folder they were written to)."""
    out = tmp_path_factory.mktemp("original_run")
    return run_lm_eval(tiny_model_dir, [TASK], out, {"data_dir": str(demo_data_dir)}, limit=4, log_samples=True), out


def test_live_model_gives_the_numbers_of_the_saved_folder(tmp_path, tiny_model_dir, demo_data_dir, original_run):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    with torch.no_grad():  # move the weights, so the folder on disk is not what is evaluated by accident
        model.lm_head.weight.mul_(3.0)
    metadata = {"data_dir": str(demo_data_dir)}
    live = task_metrics(evaluate_lm(live_hf_lm(model, tokenizer), [TASK], metadata=metadata, limit=4))[TASK]
    model.save_pretrained(tmp_path / "saved")
    tokenizer.save_pretrained(tmp_path / "saved")
    saved = task_metrics(run_lm_eval(tmp_path / "saved", [TASK], tmp_path / "out", metadata, limit=4))[TASK]
    original = task_metrics(original_run[0])[TASK]
    finite = [m for m, v in saved.items() if math.isfinite(v)]
    assert "forget_prob" in finite
    assert all(live[m] == pytest.approx(saved[m], rel=1e-6, abs=1e-9) for m in finite)
    assert live["forget_prob"] != pytest.approx(original["forget_prob"], rel=1e-3)  # the live weights were evaluated
    assert list((tmp_path / "out").rglob("results_*.json"))


def test_environment_report_is_computed_once_per_process(monkeypatch):
    import lm_eval.evaluator as evaluator
    import lm_eval.loggers.utils as logger_utils

    calls = []
    monkeypatch.setattr(logger_utils, "add_env_info", lambda d: (calls.append(1), d.update({"pretty_env_info": "x"})))
    monkeypatch.setattr(patches, "_ENV_INFO", {})
    monkeypatch.setattr(evaluator, "add_env_info", logger_utils.add_env_info)
    patches.cache_env_info()
    first, second = {}, {}
    evaluator.add_env_info(first)
    evaluator.add_env_info(second)
    assert len(calls) == 1 and first == second == {"pretty_env_info": "x"}


def test_unknown_tasks_are_named():
    assert unknown_tasks([TASK, "tofu", "tofu_forget11"]) == ["tofu_forget11"]


def test_log_samples_writes_the_samples_files_of_lm_eval_log_samples(original_run):
    """`run_lm_eval(log_samples=True)` writes what `lm_eval --log_samples --output_path OUT` writes: the results file
    without the samples (their hashes in `task_hashes`) and `samples_<task>_<same date>.jsonl` beside it, one record
    per document in lm-eval's sanitised form; the returned samples are lm-eval's, untouched."""
    import json

    res, out = original_run
    (results_file,) = out.rglob("results_*.json")
    (samples_file,) = out.rglob("samples_*.jsonl")
    assert samples_file.parent == results_file.parent
    assert samples_file.name == f"samples_{TASK}_{results_file.stem.removeprefix('results_')}.jsonl"
    saved = json.loads(results_file.read_text())
    assert "samples" not in saved and len(saved["task_hashes"][TASK]) == 64
    records = [json.loads(line) for line in samples_file.read_text().splitlines()]
    returned = res["samples"][TASK]
    assert [r["doc_id"] for r in records] == [s["doc_id"] for s in returned] == [0, 1, 2, 3]
    assert all(set(r["arguments"]) == {f"gen_args_{i}" for i in range(len(s["arguments"]))}
               for r, s in zip(records, returned, strict=True))  # lm-eval's form on disk...
    assert all(isinstance(s["arguments"], (list, tuple)) for s in returned)  # ...and in memory lm-eval's own
    assert [r["forget_prob"]["prob"] for r in records] == [s["forget_prob"]["prob"] for s in returned]
