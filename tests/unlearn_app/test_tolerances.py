"""The relative tolerance (``reader.TOLERANCE``, 1e-6) at its edge: a number off by 2e-6 (relative) is a mismatch, one
off by 5e-7 agrees. Checked where it is used: the leaderboard's validation by recomputation and the
open-unlearning reader's comparison of a stored value with its recomputation. A tolerance loosened to 1e-2 (or
tightened to 1e-7) fails here; the other tests tamper numbers by far more than either."""

import pytest

from fixtures.leaderboard import TASK, tofu_records, unlearn_run_folder, write_tofu_run
from fixtures.open_unlearning import tofu_logs, write_ou
from unlearn_app.leaderboard.submission import build
from unlearn_app.leaderboard.validate import check_folder
from unlearn_app.open_unlearning.reader import TOLERANCE, read_ou_folder
from unlearn_tasks.tofu.aggregate import ReferenceData, compute_metrics, forget_truth_ratios

REF = tofu_records(1)
JUST_OUTSIDE, JUST_INSIDE = 2e-6, 5e-7


def test_the_tolerance_is_one_in_a_million():
    assert TOLERANCE == 1e-6 and JUST_INSIDE < TOLERANCE < JUST_OUTSIDE


def _true_forget_prob(records):
    ref_metrics = compute_metrics(REF, None)
    ref = ReferenceData(forget_truth_ratios(REF), "forget01", {"mia_min_k_auc": ref_metrics["mia_min_k_auc"]})
    return compute_metrics(records, ref)["forget_prob"]


@pytest.mark.parametrize("off, mismatched", [(JUST_OUTSIDE, True), (JUST_INSIDE, False), (0.0, False)])
def test_validation_at_the_edge_of_the_tolerance(tmp_path, off, mismatched):
    from unlearn_app.leaderboard.store import save_local

    records = tofu_records(3, 0.6)
    true = _true_forget_prob(records)
    write_tofu_run(tmp_path / "ref", REF)
    run = unlearn_run_folder(tmp_path / "ga", "ga", {"lr": 1e-5}, records, REF, tamper={"forget_prob": true * (1 + off)})
    check = check_folder(save_local(build([run], reference=tmp_path / "ref"), tmp_path / "board"))
    assert check.recomputed[TASK]["forget_prob"] == pytest.approx(true, rel=1e-12)
    assert check.mismatched == ({TASK: ["forget_prob"]} if mismatched else {})
    assert check.ok is not mismatched


@pytest.mark.parametrize("off, noted", [(JUST_OUTSIDE, True), (JUST_INSIDE, False)])
def test_an_open_unlearning_value_at_the_edge_of_the_tolerance(tmp_path, off, noted):
    # the fixture's forget_Q_A_Prob items average to 0.75 (their agg_value agrees)
    summary = {"forget_Q_A_Prob": 0.75 * (1 + off)}
    [task] = read_ou_folder(write_ou(tmp_path / "tofu_forget01_x", tofu_logs(), summary=summary))
    assert task.metrics["forget_prob"] == pytest.approx(0.75, rel=1e-12)
    notes = [n for n in task.notes if "forget_Q_A_Prob" in n]
    assert len(notes) == (1 if noted else 0)
    assert all(n.startswith(f"{tmp_path / 'tofu_forget01_x'}: forget_Q_A_Prob = 0.750001 in TOFU_SUMMARY.json, but "
                            "0.75 recomputed from the per-item values") for n in notes)
