"""Issue 26, item 1: open-unlearning's extraction strength and exact memorization on MUSE's forget VerbMem passages
(hand-computed from argmax flags)."""

import pytest

from unlearn_tasks.muse.aggregate import compute_metrics, metric_names
from unlearn_tasks.muse.scoring import memorization


def test_every_continuation_token_but_the_last_as_open_unlearning():
    # window [1, 0, 1, 1] (the last flag dropped): EM 3/4; suffix from k = 2: ES 1 - 2/4
    assert memorization({"argmax_match": [1, 0, 1, 1, 0]}) == pytest.approx(
        {"exact_memorization": 0.75, "extraction_strength": 0.5})
    # window [1, 0]: no suffix matches -> open-unlearning's 1 / n
    assert memorization({"argmax_match": [1, 0, 1]})["extraction_strength"] == pytest.approx(0.5)
    assert memorization({"logprobs": [-1.0]}) == {}


def test_means_over_the_forget_passages():
    records = [{"set": "verbmem_forget", "index": 0, "rougeL_f1": 0.5, "exact_memorization": 0.75,
                "extraction_strength": 0.5},
               {"set": "verbmem_forget", "index": 1, "rougeL_f1": 1.0, "exact_memorization": None,
                "extraction_strength": 0.0}]
    m = compute_metrics(records, ["verbmem"], None)
    assert m == pytest.approx({"forget_verbmem": 0.75, "extraction_strength": 0.25, "exact_memorization": 0.75})
    assert list(m) == metric_names(["verbmem"])


def test_the_task_reads_the_second_verbmem_response(muse_data_dir):
    from lm_eval.tasks import TaskManager

    from harness_ext import tasks_dir

    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata={"data_dir": str(muse_data_dir)})
    task = tm.load(["muse_news_verbmem"])["tasks"]["muse_news_verbmem"]
    doc = next(d for d in task.test_docs() if d["set"] == "verbmem_forget")
    record = task.score_document(doc, ["some text", {"logprobs": [-1.0] * 3, "argmax_match": [1, 1, 0]}])
    assert record["exact_memorization"] == 1.0 and record["extraction_strength"] == 1.0
