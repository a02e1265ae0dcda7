"""One run on two processes takes the steps of one process with the two processes' batch: ``accelerate launch``
(two CPU processes over gloo here, the path GPUs take over NCCL) with ``--batch-size 2`` ends in the weights of one
process with ``--batch-size 4``. forget01 has 6 items, so each epoch ends with an uneven batch (2 of 4 rows), which
accelerate fills with repeated rows on the second process."""

from __future__ import annotations

import pytest

from fixtures.commands import launch, run_command
from fixtures.weights import logged_losses, update_difference

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("method", ["npo", "ga"])  # a reference model and paired retain rows; a plain loss
def test_two_processes_end_in_the_weights_of_one(method, tiny_model_dir, demo_data_dir, tmp_path):
    common = ["run", "--method", method, "--full", "--model", str(tiny_model_dir), "--data", "demo",
              "--data-dir", str(demo_data_dir), "--forget", "forget01", "--retain", "retain99", "--epochs", "2",
              "--lr", "1e-3", "--quiet"]
    one = run_command(["unlearn", *common, "--batch-size", "4", "--out", str(tmp_path / "one")])
    assert one.returncode == 0, one.stderr[-3000:]
    two = launch(["unlearn", *common, "--batch-size", "2", "--out", str(tmp_path / "two")])
    assert two.returncode == 0, two.stderr[-3000:]

    difference, update = update_difference(tiny_model_dir, tmp_path / "one", tmp_path / "two")
    assert update > 1e-2  # the run moved the weights
    assert difference <= 1e-4
    # 2 epochs of 2 steps (4 + 2 rows), the losses logged over the global batch
    assert logged_losses(tmp_path / "two") == pytest.approx(logged_losses(tmp_path / "one"), rel=1e-4)
    assert len(logged_losses(tmp_path / "one")) == 4
    # written once, by the main process: the folder is complete and nothing is left beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one", "two"]
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == sorted(p.name for p in (tmp_path / "one").iterdir())
