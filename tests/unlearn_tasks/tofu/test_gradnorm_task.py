"""Issue 26, item 2: the TOFU task's opt-in GradNorm MIA (``mia_gradnorm``): its requests, its AUROC by hand, and an
end-to-end run on the tiny model (hf)."""

import math

import pytest
from lm_eval.tasks import TaskManager

from harness_ext import tasks_dir
from harness_ext.evaluate import run_lm_eval
from harness_ext.request_types import ANSWER_GRADNORM
from unlearn_tasks.tofu.aggregate import compute_metrics


def _load(**metadata):
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    return tm.load(["tofu_forget01"])["tasks"]["tofu_forget01"]


@pytest.mark.parametrize("scoring, ou", [("all", False), ("tofu", True)])
def test_one_gradnorm_request_per_forget_and_holdout_answer(demo_data_dir, scoring, ou):
    task = _load(data_dir=str(demo_data_dir), mia_gradnorm=True, answer_scoring=scoring)
    task.build_all_requests(limit=None, rank=0, world_size=1)
    grad = [i for i in task.instances if i.request_type == ANSWER_GRADNORM]
    assert {i.doc["split"] for i in grad} == {"forget", "holdout"}
    assert len(grad) == sum(d["split"] in ("forget", "holdout") for d in task.test_docs())
    assert grad[0].args[2] == {"skip_first": ou, "drop_eos": ou, "train_mode": ou, "p": 2}
    assert "mia_gradnorm_auc" in task.metric_names()
    assert "mia_gradnorm_auc" not in _load(data_dir=str(demo_data_dir)).metric_names()  # opt-in


def test_gradnorm_auroc_by_hand():
    records = [{"split": "forget", "index": 0, "mia_gradnorm": 1.0}, {"split": "forget", "index": 1, "mia_gradnorm": 3.0},
               {"split": "holdout", "index": 0, "mia_gradnorm": 2.0}, {"split": "holdout", "index": 1, "mia_gradnorm": 4.0}]
    # holdout > forget in 3 of the 4 pairs (2 > 1, 4 > 1, 4 > 3)
    assert compute_metrics(records, None)["mia_gradnorm_auc"] == pytest.approx(0.75)


@pytest.mark.slow
def test_lm_eval_reports_gradnorm_on_hf(tiny_model_dir, demo_data_dir, tmp_path):
    res = run_lm_eval(tiny_model_dir, ["tofu_forget01_likelihood"], tmp_path / "out",
                      {"data_dir": str(demo_data_dir), "mia_gradnorm": True}, batch_size=8)
    value = res["results"]["tofu_forget01_likelihood"]["mia_gradnorm_auc,none"]
    assert not math.isnan(value) and 0.0 <= value <= 1.0
