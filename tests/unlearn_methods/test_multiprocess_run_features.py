"""The rest of `unlearn run` on two processes (``accelerate launch``, two CPU processes over gloo here, the path GPUs
take over NCCL): a NaN loss on one process stops both with the one-line error; AltPO generates its alternates once,
on the main process; ``--eval-every`` evaluates on the main process and gives the rows and the selected weights of
one process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from fixtures.commands import launch

pytestmark = pytest.mark.slow
PROBES = str(Path(__file__).resolve().parents[1] / "fixtures" / "process_probes.py")


def _common(model: Path, data: Path, method: str) -> list[str]:
    return ["run", "--method", method, "--full", "--model", str(model), "--data", "demo", "--data-dir", str(data),
            "--forget", "forget01", "--retain", "retain99", "--lr", "1e-3", "--quiet"]


def test_a_nan_loss_on_one_process_stops_every_process_with_the_error(tiny_model_dir, demo_data_dir, tmp_path):
    out = tmp_path / "run"
    done = launch(["unlearn", *_common(tiny_model_dir, demo_data_dir, "ga"), "--epochs", "2", "--batch-size", "1",
                   "--out", str(out)], script=PROBES, env={"PROBE_NAN_ON_PROCESS": "1"}, timeout=240)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert done.returncode != 0
    # both processes stop at the same step with the same line, naming the process whose loss is NaN (under load the
    # launcher may stop the second process, after the first has exited, before it has printed its line)
    assert 1 <= len(errors) <= 2 and len(set(errors)) == 1, done.stderr[-3000:]
    assert "The ga loss is nan on process 1 of 2 at step 1 (terms: {'forget_nll':" in errors[0]
    # the weights before the failing step (after step 0's update) are kept, written once by the main process
    kept = out.parent / "run.partial" / "last_good"
    assert (kept / "model.safetensors").is_file()
    metrics = json.loads((out.parent / "run.partial" / "train_metrics.json").read_text())
    assert "on process 1 of 2" in metrics["error"]


TASK = "tofu_forget01_likelihood"


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return {k: v.double() for k, v in load_file(str(folder / "model.safetensors")).items()}


def _relative(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], base: dict[str, torch.Tensor]) -> float:
    """||a - b|| / ||a - base||: how far apart two runs' weights are, relative to the update."""
    diff = torch.sqrt(sum(((a[k] - b[k]) ** 2).sum() for k in base))
    return float(diff / torch.sqrt(sum(((a[k] - base[k]) ** 2).sum() for k in base)))


def test_altpo_with_eval_every_on_two_processes_is_the_run_of_one(tiny_model_dir, demo_data_dir, tmp_path):
    """AltPO generates its alternates once (main process) and every process trains on them; --eval-every evaluates
    on the main process at steps 0 and 2 and --select puts the chosen step's weights back: the rows, the selected
    step, the alternates and the weights are those of one process with the two processes' batch."""
    from unlearn_app.pipeline import run_unlearning
    from unlearn_methods.alternates import ALTERNATES_FILE
    from unlearn_methods.config import load_run_config
    from unlearn_methods.eval_during import ROWS_FILE, read_rows

    select = f"{TASK}/forget_prob:max"
    calls = tmp_path / "calls.txt"
    two = launch(["unlearn", *_common(tiny_model_dir, demo_data_dir, "altpo"), "--epochs", "1", "--batch-size", "2",
                  "--param", "max_new_tokens=8", "--eval-tasks", TASK, "--eval-every", "2", "--eval-limit", "2",
                  "--select", select, "--out", str(tmp_path / "two")],
                 script=PROBES, env={"PROBE_CALLS": str(calls)}, timeout=400)
    assert two.returncode == 0, two.stderr[-3000:]
    one = run_unlearning(load_run_config(
        None, method="altpo", lora=False, model=str(tiny_model_dir), data="demo", data_dir=str(demo_data_dir),
        forget="forget01", retain="retain99", lr=1e-3, progress=False, epochs=1, batch_size=4,
        method_params={"max_new_tokens": 8}, eval_tasks=[TASK], eval_every=2, eval_limit=2, select=select,
        out=str(tmp_path / "one")))

    assert calls.read_text().splitlines() == ["generate_alternates 0"]  # once, on the main process
    assert (tmp_path / "two" / ALTERNATES_FILE).read_text() == (one / ALTERNATES_FILE).read_text()
    rows_two, rows_one = read_rows(tmp_path / "two" / ROWS_FILE), read_rows(one / ROWS_FILE)
    assert [r["step"] for r in rows_two] == [r["step"] for r in rows_one] == [0, 2]
    for r2, r1 in zip(rows_two, rows_one):
        assert r2 == pytest.approx(r1, rel=1e-4, nan_ok=True)  # forget_quality, privleak: NaN without a reference
    assert rows_one[1][f"{TASK}/forget_prob"] != rows_one[0][f"{TASK}/forget_prob"]  # training moved the metric
    record_two, record_one = (json.loads((d / "train_metrics.json").read_text())["eval_during_training"]
                              for d in (tmp_path / "two", one))
    assert record_two["selected_step"] == record_one["selected_step"]
    # the last step's weights (the Trainer's checkpoint) and the output (the selected step's) agree
    base = _weights(tiny_model_dir)
    last_two, last_one = (_weights(d / "checkpoints" / "checkpoint-2") for d in (tmp_path / "two", one))
    assert _relative(last_one, last_two, base) <= 1e-4
    out_two, out_one = _weights(tmp_path / "two"), _weights(one)
    assert all(torch.allclose(out_two[k], out_one[k], rtol=0, atol=1e-6) for k in base)
