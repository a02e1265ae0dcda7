"""The reference MIA (`mia_reference_auc`: each item's answer loss minus the retain run's) is recomputed from the
per-item losses of the run and of its reference, as the TOFU task computes it: a submission that shows it is fully
verified (the demo's runs are: tests/unlearn_app/test_cli.py), and a wrong value is named."""

import pytest

from fixtures.leaderboard import TASK, tofu_records, write_tofu_run
from unlearn_app.leaderboard.store import save_local
from unlearn_app.leaderboard.submission import build
from unlearn_app.leaderboard.validate import check_folder
from unlearn_tasks.metrics import mia
from unlearn_tasks.tofu.aggregate import ReferenceData, item_losses, reference_mia_auc


@pytest.mark.parametrize("shift", [0.0, 0.1])
def test_reference_mia_is_recomputed_from_both_runs_losses(tmp_path, shift):
    ref_records, records = tofu_records(1), tofu_records(2, 0.3)
    losses = {s: item_losses(ref_records, s) for s in ("forget", "holdout")}
    truth = reference_mia_auc(records, ReferenceData([], "forget01", {}, losses=losses))
    plain = mia.mia_auroc(item_losses(records, "forget"), item_losses(records, "holdout"))  # the LOSS attack's
    assert 0.0 < truth < 1.0 and abs(truth - 0.5) > 0.01 and abs(truth - plain) > 0.01  # not the plausible wrong ones
    write_tofu_run(tmp_path / "ref", ref_records)
    write_tofu_run(tmp_path / "run", records, tamper={"mia_reference_auc": truth + shift})
    built = build([tmp_path / "run"], reference=tmp_path / "ref", model_id="me/m", revision="a" * 40, method="npo")
    check = check_folder(save_local(built, tmp_path / "board"))
    assert "mia_reference_auc" not in check.unverified.get(TASK, [])
    assert check.recomputed[TASK]["mia_reference_auc"] == pytest.approx(truth, rel=1e-12)
    if shift:
        assert check.mismatched == {TASK: ["mia_reference_auc"]}
    else:
        assert check.errors == [] and check.mismatched == {}
