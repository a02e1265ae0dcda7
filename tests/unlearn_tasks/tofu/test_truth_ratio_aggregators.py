"""Issue 26, item 5: open-unlearning's truth-ratio aggregations selectable per set with the TOFU task's
``truth_ratio_aggregator`` option; hand-computed values."""

import math

import pytest
from lm_eval.tasks import TaskManager

from harness_ext import tasks_dir
from unlearn_tasks.tofu.aggregate import compute_metrics
from unlearn_tasks.tofu.options import TofuOptions


def _records():
    forget = [{"split": "forget", "index": i, "truth_ratio": r} for i, r in enumerate([0.25, 1.0])]
    retain = [{"split": "retain", "index": 0, "truth_ratio": 0.25}]
    return forget + retain


def test_default_aggregations_are_tofus():
    m = compute_metrics(_records(), None, TofuOptions.from_metadata({}).aggregators())
    assert m["forget_truth_ratio"] == pytest.approx((0.25 + 1.0) / 2)  # min(R, 1/R)
    assert m["retain_truth_ratio"] == pytest.approx(0.75)  # max(0, 1 - R)
    assert compute_metrics(_records(), None) == pytest.approx(m, nan_ok=True)


def test_prob_mean_on_the_forget_set_and_per_set_choices():
    m = compute_metrics(_records(), None, TofuOptions.from_metadata({"truth_ratio_aggregator": "prob_mean"}).aggregators())
    assert m["forget_truth_ratio"] == pytest.approx((0.8 + 0.5) / 2)  # 1 / (1 + R)
    assert m["retain_truth_ratio"] == pytest.approx(0.75)  # untouched
    opts = TofuOptions.from_metadata({"truth_ratio_aggregator": {"retain": "prob_mean", "forget": "true_better"}})
    m = compute_metrics(_records(), None, opts.aggregators())
    assert m["retain_truth_ratio"] == pytest.approx(0.8)
    assert m["forget_truth_ratio"] == pytest.approx((0.75 + 0.0) / 2)
    assert math.isnan(m["ra_truth_ratio"])


@pytest.mark.parametrize("bad", ["mean", {"holdout": "prob_mean"}, {"forget": "avg"}, 3])
def test_a_bad_aggregator_is_refused_naming_the_choices(bad):
    with pytest.raises(ValueError, match="truth_ratio_aggregator must be one of"):
        TofuOptions.from_metadata({"truth_ratio_aggregator": bad})


def test_the_choice_is_recorded_in_the_metric_modes_only_when_made(demo_data_dir):
    def load(**metadata):
        tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                         metadata={"data_dir": str(demo_data_dir), **metadata})
        return tm.load(["tofu_forget01"])["tasks"]["tofu_forget01"]

    assert "truth_ratio_aggregator" not in load().metric_modes()
    modes = load(truth_ratio_aggregator="prob_mean").metric_modes()
    assert modes["truth_ratio_aggregator"] == {"forget": "prob_mean", "retain": "true_better", "ra": "true_better",
                                               "wf": "true_better"}
