"""Issue 26, item 3: the reference-based MIA from the reference run's per-item losses (hand-computed AUROC), the
losses each kind of reference provides, and the message when a reference has none."""

import json
import math

import pytest
from lm_eval.tasks import TaskManager

from harness_ext import tasks_dir
from unlearn_tasks.tofu.aggregate import ReferenceData, compute_metrics, reference_mia_auc, reference_record
from unlearn_tasks.tofu.reference import load_reference
from unlearn_tasks.tofu.scoring import question_key

RECORDS = [{"split": "forget", "index": 1, "mia_loss": 2.0}, {"split": "forget", "index": 0, "mia_loss": 3.0},
           {"split": "holdout", "index": 0, "mia_loss": 1.0}, {"split": "holdout", "index": 1, "mia_loss": 4.0}]


def test_reference_attack_auroc_by_hand():
    ref = ReferenceData([1.0, 1.0], losses={"forget": [1.0, 1.5], "holdout": [0.5, 1.0]})
    # scores: forget 3-1 = 2, 2-1.5 = 0.5; holdout 1-0.5 = 0.5, 4-1 = 3. Pairs with holdout > forget:
    # (0.5 vs 2) no, (0.5 vs 0.5) a tie = 1/2, (3 vs 2) yes, (3 vs 0.5) yes -> 2.5 / 4
    assert reference_mia_auc(RECORDS, ref) == pytest.approx(0.625)
    assert compute_metrics(RECORDS, ref)["mia_reference_auc"] == pytest.approx(0.625)
    assert math.isnan(reference_mia_auc(RECORDS, ReferenceData([1.0, 1.0])))  # a reference without losses
    other = ReferenceData([1.0], losses={"forget": [1.0], "holdout": [0.5, 1.0]})  # another item count
    assert math.isnan(reference_mia_auc(RECORDS, other))


def test_our_runs_log_their_losses_and_open_unlearning_logs_are_read(tmp_path):
    record = reference_record(RECORDS, {}, "forget01", {})
    assert record["mia_loss"] == {"forget": [3.0, 2.0], "holdout": [1.0, 4.0]}  # item order
    ou = {"forget_truth_ratio": {"value_by_index": {str(i): {"score": 1.0} for i in range(40)}},
          "mia_loss": {"forget": {"value_by_index": {"1": {"score": 2.5}, "0": {"score": 1.5}}},
                       "holdout": {"value_by_index": {"0": {"score": 4.0}, "1": {"score": 0.5}}}, "agg_value": 0.5}}
    (tmp_path / "TOFU_EVAL.json").write_text(json.dumps(ou))
    assert load_reference(tmp_path, "forget01").losses == {"forget": [1.5, 2.5], "holdout": [4.0, 0.5]}
    del ou["mia_loss"]
    (tmp_path / "TOFU_EVAL.json").write_text(json.dumps(ou))
    assert load_reference(tmp_path, "forget01").losses is None


def _load(**metadata):
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    return tm.load(["tofu_forget01_likelihood"])["tasks"]["tofu_forget01_likelihood"]


def test_a_reference_without_losses_is_refused_saying_how_to_produce_one(demo_data_dir, tmp_path, caplog):
    """Issue 26, item 3: asked for (``mia_reference: true``), a reference without per-item losses (or fewer than the
    items evaluated) is a one-line error naming the reference folder and the command that logs them, or the option
    that goes without the metric. Not asked for, the metric is left out with that message as a warning, so a legacy
    TOFU log still gives Forget Quality."""
    from unlearn_tasks.reference_logs import ReferenceLogError

    docs = _load(data_dir=str(demo_data_dir)).test_docs()
    forget = [question_key(d["question"]) for d in docs if d["split"] == "forget"]
    n_holdout = sum(d["split"] == "holdout" for d in docs)
    entry = {"format": "lm-eval-unlearning/tofu-reference/1", "forget_split": "forget01", "n_forget": len(forget),
             "forget_truth_ratio": [1.0] * len(forget), "forget_question_keys": forget, "mia_auc": {},
             "model": {"pretrained": "retain-model"}}
    path = tmp_path / "ref" / "results_2026-01-01T00-00-00.json"
    path.parent.mkdir()

    def write(record: dict) -> None:
        path.write_text(json.dumps({"results": {}, "configs": {"tofu_forget01": {"unlearning_reference": record}}}))

    write(entry)
    with pytest.raises(ReferenceLogError) as e:
        _load(data_dir=str(demo_data_dir), reference=str(path.parent), mia_reference=True)
    message = str(e.value)
    assert "\n" not in message and str(path.parent) in message and "holds no per-item answer losses" in message
    assert "--tasks tofu_forget01_likelihood --output_path" in message and '"mia_reference": false' in message
    task = _load(data_dir=str(demo_data_dir), reference=str(path.parent), mia_reference=False)  # goes without it
    assert "mia_reference_auc" not in task.metric_names() and task.reference is not None
    with caplog.at_level("WARNING"):
        task = _load(data_dir=str(demo_data_dir), reference=str(path.parent))  # unset: left out, said why
    assert "mia_reference_auc" not in task.metric_names() and task.reference is not None
    assert f"{path.parent} holds no per-item answer losses" in caplog.text and "left out of this run" in caplog.text
    write({**entry, "mia_loss": {"forget": [1.0] * len(forget), "holdout": [1.0] * (n_holdout - 1)}})  # a --limit run
    with pytest.raises(ReferenceLogError, match=f"logged {len(forget)} forget / {n_holdout - 1} holdout losses"):
        _load(data_dir=str(demo_data_dir), reference=str(path.parent), mia_reference=True)
    write({**entry, "mia_loss": {"forget": [1.0] * len(forget), "holdout": [1.0] * n_holdout}})
    assert "mia_reference_auc" in _load(data_dir=str(demo_data_dir), reference=str(path.parent)).metric_names()
