"""The WaterDrum tasks inside lm-eval: discovery, documents and requests, an end-to-end run on watermarked data."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from lm_eval.tasks import TaskManager

from fixtures import waterdrum as wf
from harness_ext import tasks_dir
from unlearn_tasks.dataset_loader import DataError

TASKS = {"waterdrum", "waterdrum_ax", "waterdrum_ax_forget03", "waterdrum_ax_forget05", "waterdrum_tofu",
         "waterdrum_tofu_forget01", "waterdrum_tofu_forget05"}
METRICS = {"forget_strength", "retain_strength", "other_id_strength", "waterdrum_auroc", "forget_rougeL_recall",
           "retain_rougeL_recall", "forget_knowmem", "retain_knowmem", "forget_min_k", "retain_min_k"}


def _load(name, **metadata):
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    return tm.load([name])["tasks"][name]


def test_every_task_is_indexed():
    """lm-eval silently skips a YAML it cannot parse."""
    assert TASKS <= set(TaskManager(include_path=str(tasks_dir()), include_defaults=False).all_tasks)


def test_ax_documents_and_requests(waterdrum_data):
    md = wf.metadata(waterdrum_data["data"], waterdrum_data["model"])
    task = _load("waterdrum_ax", **md, pretrained=str(waterdrum_data["model"]))
    docs = list(task.test_docs())
    texts = [d for d in docs if d["kind"] == "text"]
    assert len(texts) == 16 and len([d for d in docs if d["kind"] == "knowmem"]) == 16
    assert [d["split"] for d in docs[:4]] == ["retain", "forget", "retain", "forget"]  # interleaved for --limit
    assert {d["owner"] for d in texts if d["split"] == "forget"} == {3}
    assert [d["owner"] for d in texts if d["split"] == "retain"] == sorted(d["owner"] for d in texts if d["split"] == "retain")
    full = [json.loads(x)["text"] for x in (waterdrum_data["data"] / "forget_01" / "full.jsonl").read_text().splitlines()]
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(waterdrum_data["model"])
    for d in texts[:4]:
        assert d["prompt"] + d["reference"] == d["text"] and d["text"] in full
        assert len(tok.encode(d["prompt"], add_special_tokens=False)) <= 17
    task.build_all_requests(limit=4, rank=0, world_size=1)
    by_kind = {}
    for inst in task.instances:
        by_kind.setdefault((inst.doc["kind"], inst.request_type), []).append(inst)
    sample = by_kind[("text", "generate_until")][0]
    assert sample.repeats == 3 and sample.args[0] == sample.doc["prompt"]
    assert sample.args[1]["do_sample"] is True and sample.args[1]["temperature"] == 1.0
    assert sample.args[1]["max_gen_toks"] == 200 and sample.args[1]["top_k"] == 0
    logprobs = by_kind[("text", "unlearn_answer_logprobs")][0]
    assert logprobs.repeats == 1 and logprobs.args == ("", logprobs.doc["text"])
    greedy = by_kind[("knowmem", "generate_until")][0]
    assert greedy.repeats == 1 and greedy.args[1]["do_sample"] is False and greedy.args[1]["max_gen_toks"] == 32
    assert greedy.args[0] == f"Question: {greedy.doc['question']}\nAnswer:"


def test_bad_options_and_data_are_clear_errors(waterdrum_data):
    md = wf.metadata(waterdrum_data["data"], waterdrum_data["model"])
    with pytest.raises(DataError, match="owners"):
        _load("waterdrum_ax", **{**md, "owners": 5})
    with pytest.raises(ValueError, match="verification ids"):
        _load("waterdrum_ax", **{**md, "ids": "0-2"})
    with pytest.raises(DataError, match="forget_05"):
        _load("waterdrum_tofu_forget05", **md)
    with pytest.raises(ValueError, match="duplicate_owner"):
        _load("waterdrum_ax", **{**md, "splits": ["retain", "forget", "exact_duplicate"]})


@pytest.fixture(scope="module")
def trained_run(waterdrum_data):
    return wf.lm_eval_run(str(waterdrum_data["model"]), str(waterdrum_data["data"]), ("waterdrum_ax", "waterdrum_tofu"))


@pytest.mark.slow
@pytest.mark.parametrize("task", ["waterdrum_ax", "waterdrum_tofu"])
def test_end_to_end_strengths(trained_run, task):
    out, res = trained_run
    values = {k.split(",")[0]: v for k, v in res["results"][task].items() if "," in k and "stderr" not in k}
    assert set(values) == METRICS
    for name in METRICS - {"forget_knowmem", "retain_knowmem"}:
        assert not math.isnan(values[name]), name
    # A model trained on watermarked data carries its owners' watermarks; unrelated ids score about 0.
    assert values["forget_strength"] > 0.15 and values["retain_strength"] > 0.15
    assert abs(values["other_id_strength"]) < 0.1
    (results_file,) = list(out.rglob("results_*.json"))
    record = json.loads(results_file.read_text())["configs"][task]["unlearning_waterdrum"]
    assert record["forget_strength"] == pytest.approx(values["forget_strength"])
    assert record["generations_per_query"] == 3
    assert np.bincount(record["generations"]["query"]).tolist() == [3] * len(record["queries"]["owner"])  # all K kept
    scores = np.array(record["queries"]["scores_all_ids"])
    own = np.array([record["ids"].index(o) for o in record["queries"]["owner"]])
    own_scores = scores[np.arange(len(own)), own]
    wrong = scores[np.arange(len(own)), (own + 1) % len(record["ids"])]
    assert own_scores.mean() > wrong.mean() + 0.2  # the owner's id beats a wrong id
    assert (own_scores > wrong).mean() >= 0.75
    if task == "waterdrum_ax":
        assert record["ids"] == [0, 1, 2, 3] and record["forget_owners"] == [3]
        assert set(record["owner_strengths"]) == {"0", "1", "2", "3"}
    else:
        assert record["ids"] == [0, 1] and record["forget_owners"] == [1] and record["retain_owners"] == [0]
        assert not math.isnan(values["forget_knowmem"])


@pytest.mark.slow
def test_untrained_model_shows_no_watermark(waterdrum_data, tiny_model_dir, trained_run):
    _, res = wf.lm_eval_run(str(tiny_model_dir), str(waterdrum_data["data"]), ("waterdrum_ax",))
    values = res["results"]["waterdrum_ax"]
    trained = trained_run[1]["results"]["waterdrum_ax"]
    for key in ("forget_strength,none", "retain_strength,none"):  # few short texts: noise sd ~0.05
        assert abs(values[key]) < 0.2 and values[key] < trained[key] - 0.1
