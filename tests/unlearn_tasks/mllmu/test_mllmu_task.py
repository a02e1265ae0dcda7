"""The MLLMU-Bench tasks inside lm-eval: discovery, requests with their photos (few-shot photos first), the text
tasks without, and (slow) `lm_eval --model hf-multimodal --tasks mllmu_forget05` on a tiny LLaVA."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("PIL")

from lm_eval.tasks import TaskManager  # noqa: E402

from fixtures.commands import run_command  # noqa: E402
from harness_ext import tasks_dir  # noqa: E402
from unlearn_tasks.mllmu import scoring  # noqa: E402
from unlearn_tasks.mllmu.documents import PARTS  # noqa: E402
from unlearn_tasks.mllmu.splits import SETS  # noqa: E402

TASKS = {"mllmu"} | {f"mllmu_forget{s}{v}" for s in ("05", "10", "15") for v in ("", "_image", "_text")}
METRICS = set(scoring.metric_names(list(PARTS), list(SETS)))


def _load(name, **metadata):
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    return tm.load([name])["tasks"][name]


def test_every_yaml_is_indexed():
    assert TASKS <= set(TaskManager(include_path=str(tasks_dir()), include_defaults=False).all_tasks)


def test_requests_carry_the_photos_few_shot_first(mllmu_data_dir):
    task = _load("mllmu_forget15_image", data_dir=str(mllmu_data_dir))
    assert task.MULTIMODAL and set(task.metric_names()) == METRICS
    task.build_all_requests(limit=12, rank=0, world_size=1)
    for inst in task.instances:
        doc, (prompt, gen_kwargs, aux) = inst.doc, inst.args
        assert prompt == doc["prompt"] and prompt.count("<image>") == len(aux["visual"]) == len(doc["images"])
        assert gen_kwargs["max_gen_toks"] == 50 and gen_kwargs["until"] == []
    cloze = next(i for i in task.instances if i.doc["part"] == "cloze" and i.doc["set"] == "retain")
    assert len(cloze.args[2]["visual"]) == 5  # 2 few-shot people x 2 image cloze questions + the person's photo
    assert {i.doc["set"] for i in task.instances} == set(SETS)  # --limit keeps every set


def test_text_tasks_send_no_photo(mllmu_data_dir):
    task = _load("mllmu_forget05_text", data_dir=str(mllmu_data_dir), sets=["celebrity"])
    assert not task.MULTIMODAL
    task.build_all_requests(limit=3, rank=0, world_size=1)
    assert all(len(i.args) == 2 and "<image>" not in i.args[0] for i in task.instances)


def test_an_unknown_option_value_is_refused(mllmu_data_dir):
    with pytest.raises(ValueError, match="forget_split must be one of forget05, forget10, forget15"):
        _load("mllmu_forget05_image", data_dir=str(mllmu_data_dir), forget_split="forget20")


@pytest.mark.slow
def test_lm_eval_command_runs_mllmu_forget05_on_hf_multimodal(tiny_llava_dir, mllmu_data_dir, tmp_path):
    """The issue's 'done when': a bare lm_eval on an MLLMU-layout folder reports every metric, both modes (the
    few-shot prompts outgrow the tiny model's 512 positions: rotary positions extend, max_length says so)."""
    metadata = {"data_dir": str(mllmu_data_dir), "max_items_per_split": 1, "mode": "clean"}
    cmd = ["lm_eval", "--model", "hf-multimodal", "--model_args", f"pretrained={tiny_llava_dir},dtype=float32,max_length=1024",
           "--device", "cpu", "--batch_size", "4", "--tasks", "mllmu_forget05", "--metadata", json.dumps(metadata),
           "--gen_kwargs", "max_gen_toks=4", "--output_path", str(tmp_path / "out"), "--log_samples"]
    proc = run_command(cmd, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (results_file,) = list((tmp_path / "out").rglob("results_*.json"))
    results = json.loads(results_file.read_text())["results"]
    for task in ("mllmu_forget05_image", "mllmu_forget05_text"):
        values = {k.split(",")[0]: v for k, v in results[task].items() if "," in k and "stderr" not in k}
        assert set(values) == METRICS
        assert all(0 <= v <= 1 for v in values.values() if not math.isnan(v))  # clean mode: fractions
    assert len(list((tmp_path / "out").rglob("samples_mllmu_forget05_image_*.jsonl"))) == 1

    # unlearn report shows the paper's table per mode: each set's rows, in the declared order
    from unlearn_app.reports.evaluated_run import load_run
    from unlearn_app.reports.tables import compare_runs

    table = compare_runs({"run": load_run(results_file, "run", None).metrics})
    image = table.split("## mllmu_forget05_image")[1].split("## ")[0]
    labels = [line.split("|")[1].strip() for line in image.splitlines() if line.startswith("| ") and "metric" not in line]
    assert labels[:2] == ["Forget classification accuracy", "Forget fill-in-the-blank accuracy"] and len(labels) == 24
    assert labels[18] == "Celebrity classification accuracy"

    # unlearn submit carries the samples and leaderboard validate recomputes every number from them
    from unlearn_app.leaderboard.submission import build, write
    from unlearn_app.leaderboard.validate import check_folder

    built = build([results_file.parent], model_id="org/tiny-llava", revision="0" * 40, method="none")
    check = check_folder(write(built, tmp_path / "board"))
    assert check.ok, check.errors
    for task in ("mllmu_forget05_image", "mllmu_forget05_text"):
        assert set(check.recomputed[task]) == METRICS and task not in check.unverified
