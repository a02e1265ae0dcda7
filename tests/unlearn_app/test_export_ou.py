"""Issue 26, item 6 (the reverse): `unlearn export-ou` writes one of our lm-eval runs as an open-unlearning
evaluation folder in the schema OU's evaluator writes (``src/evals/base.py``: ``<BENCH>_EVAL.json`` with
``{"agg_value", "value_by_index"}`` per metric, MIA entries with ``forget`` / ``holdout``, keys sorted; and
``<BENCH>_SUMMARY.json``: metric -> agg_value), checked by reading it back through our OU reader."""

import json
import math

import pytest

from fixtures.runs import write_results
from harness_ext.evaluate import run_lm_eval
from unlearn_app.cli import main
from unlearn_app.open_unlearning.reader import read_ou_folder


def _same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-9, abs=1e-12)


@pytest.fixture(scope="module")
def tofu_run(tiny_model_dir, demo_data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("tofu_run")
    task = "tofu_forget01_likelihood"
    # with the samples file `lm_eval --log_samples` writes beside the results file (samples_<task>_<date id>.jsonl,
    # one JSON object per document holding each metric's process_results value)
    res = run_lm_eval(tiny_model_dir, [task], out, {"data_dir": str(demo_data_dir)}, batch_size=8, log_samples=True)
    return out, res["results"][task]


@pytest.mark.slow
def test_round_trip_of_a_tofu_run_with_its_per_item_values(tofu_run, tmp_path, capsys):
    run, ours = tofu_run
    assert main(["export-ou", str(run), "--out", str(tmp_path / "ou")]) == 0
    logs = json.loads((tmp_path / "ou" / "TOFU_EVAL.json").read_text())
    summary = json.loads((tmp_path / "ou" / "TOFU_SUMMARY.json").read_text())
    assert list(logs) == sorted(logs) and set(summary) == set(logs)  # OU's save_logs sorts; SUMMARY: every agg_value
    assert all(summary[k] == logs[k]["agg_value"] for k in summary)
    n_forget = len(logs["forget_Q_A_Prob"]["value_by_index"])
    assert set(logs["forget_Q_A_Prob"]["value_by_index"]["0"]) == {"prob"}  # OU's per-item keys
    assert len(logs["forget_truth_ratio"]["value_by_index"]) == n_forget
    assert set(logs["mia_loss"]) == {"agg_value", "auc", "forget", "holdout"}
    assert len(logs["extraction_strength"]["value_by_index"]) == n_forget
    [task] = read_ou_folder(tmp_path / "ou")
    assert task.notes == []  # every per-item recomputation agrees with the agg_value written
    exported = {m: v for m, v in task.metrics.items()}
    expected = {k.split(",")[0]: v for k, v in ours.items() if k.endswith(",none") and "stderr" not in k}
    for metric, value in exported.items():
        assert _same(value, expected[metric]), metric
    assert {"forget_prob", "mia_loss_auc", "extraction_strength", "exact_memorization", "ra_truth_ratio"} <= set(exported)
    # the same run as lm-eval 0.5 names it when run through a group (samples_tofu::tofu_forget01_likelihood_<date>):
    # the same folder, per-item values included
    from fixtures.lm_eval_05 import as_group_run

    (folder,) = {p.parent for p in run.rglob("results_*.json")}
    assert main(["export-ou", str(as_group_run(folder, "tofu", tmp_path / "05")), "--out", str(tmp_path / "ou05")]) == 0
    assert (tmp_path / "ou05" / "TOFU_EVAL.json").read_text() == (tmp_path / "ou" / "TOFU_EVAL.json").read_text()


def test_without_samples_the_reference_record_gives_the_per_item_values_and_bad_runs_are_refused(tmp_path, capsys):
    path = write_results(tmp_path / "run", {"muse_news": {"forget_verbmem": 0.5, "mia_loss_auc": 0.75, "privleak": -10.0}})
    data = json.loads(path.read_text())
    data["configs"]["muse_news"]["unlearning_reference"] = {"mia_loss": {"forget": [1.0, 3.0], "holdout": [2.0, 4.0]}}
    path.write_text(json.dumps(data))
    assert main(["export-ou", str(path), "--out", str(tmp_path / "ou")]) == 0
    logs = json.loads((tmp_path / "ou" / "MUSE_EVAL.json").read_text())
    assert logs["mia_loss"]["forget"]["value_by_index"] == {"0": {"score": 1.0}, "1": {"score": 3.0}}
    assert json.loads((tmp_path / "ou" / "MUSE_SUMMARY.json").read_text()) == {
        "forget_verbmem_ROUGE": 0.5, "mia_loss": 0.75, "privleak": -10.0}
    [task] = read_ou_folder(tmp_path / "ou")
    # LOSS AUROC recomputed from the exported losses: holdout (2, 4) > forget (1, 3) in 3 of 4 pairs
    assert task.metrics == {"forget_verbmem": 0.5, "mia_loss_auc": 0.75, "privleak": -10.0} and task.notes == []
    assert main(["export-ou", str(path), "--out", str(tmp_path / "ou")]) == 2  # exists: needs --overwrite
    assert "--overwrite" in capsys.readouterr().err
    other = write_results(tmp_path / "other", {"hellaswag": {"acc": 0.5}})
    assert main(["export-ou", str(other), "--out", str(tmp_path / "ou2")]) == 2
    assert "holds no TOFU or MUSE task" in capsys.readouterr().err
