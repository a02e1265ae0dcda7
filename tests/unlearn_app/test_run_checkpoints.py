"""A run's resumable checkpoints at a fixed cost (unlearn_methods.run_checkpoints): each is written while the next
step's forward and backward passes run, holds the state of its own step, survives Ctrl-C, appears complete or not
at all (a kill mid-write leaves the one before to resume from), and the last one shares its model files with the
finished folder instead of writing them twice."""

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoTokenizer, PreTrainedModel, Trainer

import unlearn_methods.methods  # noqa: F401
from unlearn_app.pipeline import run_unlearning
from unlearn_methods import run_checkpoints
from unlearn_methods.base import UnlearnTrainer
from unlearn_methods.config import load_run_config
from unlearn_methods.run_checkpoints import BackgroundCheckpoints
from unlearn_methods.training import UnlearningFailed

STEPS = 3  # forget01 of the demo corpus (6 questions) at batch 2: three steps an epoch
PROBES = Path(__file__).resolve().parents[1] / "fixtures" / "process_probes.py"


def _cfg(tmp_path, model_dir, data_dir, name, **kw):
    base = dict(method="graddiff", model=str(model_dir), out=str(tmp_path / name), data_dir=str(data_dir),
                forget="forget01", epochs=1, batch_size=2, lr=1e-3, progress=False, lora=False)
    return load_run_config(None, **{**base, **kw})


def _state(checkpoint):
    """A checkpoint's weights and AdamW moments."""
    optimizer = torch.load(checkpoint / "optimizer.pt", weights_only=True)["state"]
    moments = {f"{i}.{k}": v for i, s in optimizer.items() for k, v in s.items() if torch.is_tensor(v)}
    return load_file(str(checkpoint / "model.safetensors")), moments


def _equal(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture
def slow_writer(monkeypatch):
    """The checkpoint writer waits until the main thread has started the next step's loss (a checkpoint of step K:
    the loss of step K + 1), then 0.3 s more before it writes: an optimizer step that did not wait for the writer
    would change the weights under it. A checkpoint written in the main thread (blocking the steps) is recorded as
    not overlapped; one whose next loss never comes, after 5 s.
    ``interrupt_at``: the loss call that raises KeyboardInterrupt (Ctrl-C) instead."""
    losses, overlapped, interrupt_at = [0], {}, [None]
    original_loss, original_save = UnlearnTrainer.compute_loss, Trainer._save

    def compute_loss(self, *args, **kwargs):
        losses[0] += 1
        if losses[0] == interrupt_at[0]:
            raise KeyboardInterrupt
        return original_loss(self, *args, **kwargs)

    def save(self, output_dir=None, state_dict=None):
        step = int(str(output_dir).rsplit("-", 1)[1])
        if step < self.state.max_steps and threading.current_thread() is threading.main_thread():
            overlapped[step] = False  # written in step, as the Trainer does
        elif step < self.state.max_steps:
            deadline = time.monotonic() + 5
            while losses[0] <= step and time.monotonic() < deadline:
                time.sleep(0.01)
            overlapped[step] = losses[0] > step
            time.sleep(0.3)
        return original_save(self, output_dir, state_dict)

    monkeypatch.setattr(UnlearnTrainer, "compute_loss", compute_loss)
    monkeypatch.setattr(Trainer, "_save", save)
    return overlapped, interrupt_at


@pytest.fixture(scope="module")
def in_step(tmp_path_factory, tiny_model_dir, demo_data_dir):
    """The run with a checkpoint at every step written in step, in the Trainer's own order."""
    with pytest.MonkeyPatch.context() as m:
        m.setattr(BackgroundCheckpoints, "background_writes", lambda self: False)
        return run_unlearning(_cfg(tmp_path_factory.mktemp("in_step"), tiny_model_dir, demo_data_dir, "in_step",
                                   save_steps=1))


def test_checkpoints_are_written_beside_the_next_step_and_hold_their_own_step(tmp_path, tiny_model_dir,
                                                                              demo_data_dir, slow_writer, in_step):
    overlapped, _ = slow_writer
    beside = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "beside", save_steps=1))
    assert overlapped == {1: True, 2: True}  # step 2's and 3's losses ran while checkpoints 1 and 2 were written
    for step in (STEPS - 1, STEPS):  # the two the Trainer keeps (save_total_limit 2)
        (wa, ma), (wb, mb) = (_state(out / "checkpoints" / f"checkpoint-{step}") for out in (beside, in_step))
        assert _equal(wa, wb) and _equal(ma, mb) and len(ma) > 0, step
    first, last = (_state(beside / "checkpoints" / f"checkpoint-{s}")[0] for s in (STEPS - 1, STEPS))
    assert not _equal(first, last)  # the steps moved the weights: equal checkpoints were no accident


def test_ctrl_c_while_a_checkpoint_is_written_keeps_it_whole_and_resume_continues(tmp_path, tiny_model_dir,
                                                                                  demo_data_dir, slow_writer, in_step):
    overlapped, interrupt_at = slow_writer
    interrupt_at[0] = 2  # step 2's loss, while checkpoint 1 is being written
    with pytest.raises(UnlearningFailed, match=r"Interrupted at step 1\..*--resume"):
        run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "run", save_steps=1))
    checkpoint = tmp_path / "run.partial" / "checkpoints" / "checkpoint-1"
    weights, moments = _state(checkpoint)  # both files complete: the interrupt waited for the writer
    assert weights and moments and (checkpoint / "trainer_state.json").is_file()
    interrupt_at[0] = None
    resumed = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "run", save_steps=1, resume=True))
    wr, ws = load_file(str(resumed / "model.safetensors")), load_file(str(in_step / "model.safetensors"))
    assert wr.keys() == ws.keys() and all(torch.allclose(wr[k], ws[k], atol=1e-6) for k in ws)


def test_the_last_step_writes_its_state_once_and_the_folder_is_complete(tmp_path, tiny_model_dir, demo_data_dir,
                                                                        monkeypatch):
    """The run's fixed costs, each paid once: the last step's state written once, and (at the start) the tokenizer
    loaded once (the prompt format's check and the training share it)."""
    saves, tokenizers = [], []
    original = PreTrainedModel.save_pretrained
    monkeypatch.setattr(PreTrainedModel, "save_pretrained",
                        lambda self, folder, *a, **k: saves.append(os.path.basename(folder)) or original(
                            self, folder, *a, **k))
    load_tokenizer = AutoTokenizer.from_pretrained
    monkeypatch.setattr(AutoTokenizer, "from_pretrained",
                        lambda name, *a, **k: tokenizers.append(str(name)) or load_tokenizer(name, *a, **k))
    out = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "once", epochs=2))
    assert saves == [f"checkpoint-{STEPS}", f"checkpoint-{2 * STEPS}"]  # one save a checkpoint, none more at the end
    assert tokenizers == [str(tiny_model_dir)]
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", load_tokenizer)
    last = out / "checkpoints" / f"checkpoint-{2 * STEPS}"
    for name in ("model.safetensors", "config.json"):
        assert os.path.samefile(out / name, last / name)  # one file, two names
    assert (last / "optimizer.pt").is_file() and (last / "rng_state.pth").is_file()

    monkeypatch.setattr(run_checkpoints, "share_last_checkpoint", lambda *a: False)  # as before: saved again
    twice = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "twice", epochs=2))
    assert saves[-1] == "twice.partial" and not os.path.samefile(twice / "model.safetensors",
                                                                 twice / "checkpoints" / last.name / "model.safetensors")

    def top(folder):
        return sorted(p.name for p in folder.iterdir())

    assert top(out) == top(twice)  # the same files, and the same weights, as a folder saved the long way
    assert _equal(load_file(str(out / "model.safetensors")), load_file(str(twice / "model.safetensors")))
    assert (out / "config.json").read_text() == (twice / "config.json").read_text()


def test_a_finished_run_resumed_with_more_epochs_never_writes_through_its_links(tmp_path):
    """share_last_checkpoint links, remove_model_files unlinks: a model saved afterwards into the folder leaves
    the checkpoint's files as they were (a write through a hard link would change both)."""
    checkpoint, out = tmp_path / "checkpoint-3", tmp_path / "out"
    checkpoint.mkdir()
    out.mkdir()
    (checkpoint / "model.safetensors").write_bytes(b"step 3")
    (checkpoint / "config.json").write_text("{}")
    (checkpoint / "optimizer.pt").write_bytes(b"moments")
    (out / "model.safetensors").write_bytes(b"older")
    assert run_checkpoints.share_last_checkpoint(checkpoint, out)
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    assert os.path.samefile(out / "model.safetensors", checkpoint / "model.safetensors")
    run_checkpoints.remove_model_files(out)
    assert not any(out.iterdir())
    (out / "model.safetensors").write_bytes(b"step 6")
    assert (checkpoint / "model.safetensors").read_bytes() == b"step 3"
    (checkpoint / "config.json").write_text('{"auto_map": {}}')  # a model with code of its own: saved as before
    assert not run_checkpoints.share_last_checkpoint(checkpoint, out)
    assert (out / "model.safetensors").read_bytes() == b"step 6"


@pytest.fixture
def resume_lines():
    """The warnings ``--resume`` logs (the training module's logger, whatever handlers the CLI gave it)."""
    handler = logging.Handler()
    records: list[logging.LogRecord] = []
    handler.emit = records.append
    log = logging.getLogger("unlearn_methods.training")
    log.addHandler(handler)
    yield lambda: [r.getMessage() for r in records if r.getMessage().startswith("--resume")]
    log.removeHandler(handler)


def test_a_run_killed_while_writing_a_checkpoint_resumes_from_the_one_before(tmp_path, tiny_model_dir, demo_data_dir,
                                                                             in_step, resume_lines):
    """``unlearn run`` in a child process, SIGKILLed while its writer thread is in the middle of checkpoint 2's
    optimizer state (the probe stalls there: no timing): checkpoint 2 is nowhere a resume looks, checkpoint 1 is
    whole, and ``--resume`` says it skips 2 and reaches the uninterrupted run's weights from 1."""
    stalled, out = tmp_path / "stalled", tmp_path / "run"
    command = [sys.executable, str(PROBES), "run", "--method", "graddiff", "--full", "--model", str(tiny_model_dir),
               "--data-dir", str(demo_data_dir), "--forget", "forget01", "--epochs", "1", "--batch-size", "2",
               "--lr", "1e-3", "--save-steps", "1", "--quiet", "--out", str(out)]
    env = {**os.environ, "PROBE_STALL_CHECKPOINT": "2", "PROBE_STALLED": str(stalled),
           "PYTHONPATH": os.pathsep.join(p for p in (str(PROBES.parents[2]), os.environ.get("PYTHONPATH")) if p)}
    with open(tmp_path / "stderr", "w") as stderr:
        child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            while not stalled.exists() and child.poll() is None:  # waits for the stall (or the child's end)
                time.sleep(0.05)
            assert stalled.exists(), (tmp_path / "stderr").read_text()[-3000:]
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    checkpoints = tmp_path / "run.partial" / "checkpoints"
    staged = checkpoints / ".writing" / "checkpoint-2"
    assert (staged / "optimizer.pt").read_bytes() == b"PK\x03\x04"  # killed mid-write, the partial out of sight
    assert sorted(p.name for p in checkpoints.iterdir()) == [".writing", "checkpoint-1"]
    weights, moments = _state(checkpoints / "checkpoint-1")
    assert weights and moments

    resumed = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "run", save_steps=1, resume=True))
    assert resume_lines() == ["--resume: skipped checkpoint-2, left incomplete by a run stopped while writing it; "
                              "continuing from checkpoint-1."]
    wr, ws = load_file(str(resumed / "model.safetensors")), load_file(str(in_step / "model.safetensors"))
    assert wr.keys() == ws.keys() and all(torch.allclose(wr[k], ws[k], atol=1e-6) for k in ws)
    assert sorted(p.name for p in (resumed / "checkpoints").iterdir()) == ["checkpoint-2", "checkpoint-3"]


def test_a_checkpoint_written_in_step_appears_only_once_complete(tmp_path, tiny_model_dir, demo_data_dir,
                                                                 monkeypatch, in_step, resume_lines):
    """The in-step writes of sharded runs (FSDP, ZeRO: every process its part, then a barrier, then the rename): a
    run that dies inside checkpoint 2's optimizer state leaves it staged; ``--resume`` goes on from checkpoint 1."""
    monkeypatch.setattr(BackgroundCheckpoints, "background_writes", lambda self: False)
    save_optimizer = Trainer._save_optimizer_and_scheduler

    def dies_at_2(self, output_dir):
        if output_dir.endswith("checkpoint-2"):
            (Path(output_dir) / "optimizer.pt").write_bytes(b"PK")
            raise SystemExit("killed")
        return save_optimizer(self, output_dir)

    monkeypatch.setattr(Trainer, "_save_optimizer_and_scheduler", dies_at_2)
    with pytest.raises(SystemExit):
        run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "run", save_steps=1))
    checkpoints = tmp_path / "run.partial" / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == [".writing", "checkpoint-1"]
    monkeypatch.setattr(Trainer, "_save_optimizer_and_scheduler", save_optimizer)
    resumed = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "run", save_steps=1, resume=True))
    assert [line.split(";")[0] for line in resume_lines()] == [
        "--resume: skipped checkpoint-2, left incomplete by a run stopped while writing it"]
    wr, ws = load_file(str(resumed / "model.safetensors")), load_file(str(in_step / "model.safetensors"))
    assert wr.keys() == ws.keys() and all(torch.allclose(wr[k], ws[k], atol=1e-6) for k in ws)


def test_older_checkpoints_are_rotated_away_only_once_a_newer_one_is_complete(tmp_path):
    """save_total_limit (2) counts complete checkpoints only: while checkpoint 3 is written, or when one of its
    parts failed, checkpoints 1 and 2 stay; once it is complete, 1 goes."""
    checkpoints = tmp_path / "checkpoints"
    for step in (1, 2):
        (checkpoints / f"checkpoint-{step}").mkdir(parents=True)
    staged = checkpoints / ".writing" / "checkpoint-3"
    staged.mkdir(parents=True)
    (staged / "model.safetensors").write_bytes(b"step 3")
    failed = Future()
    failed.set_exception(OSError("disk full"))
    with pytest.raises(OSError, match="disk full"):
        run_checkpoints.complete_checkpoint(staged, 2, [failed])
    assert sorted(p.name for p in checkpoints.iterdir()) == [".writing", "checkpoint-1", "checkpoint-2"]
    written = Future()
    written.set_result(None)
    assert run_checkpoints.complete_checkpoint(staged, 2, [written]) == checkpoints / "checkpoint-3"
    assert sorted(p.name for p in checkpoints.iterdir()) == [".writing", "checkpoint-2", "checkpoint-3"]
    assert (checkpoints / "checkpoint-3" / "model.safetensors").read_bytes() == b"step 3"
    assert not any((checkpoints / ".writing").iterdir())
    assert run_checkpoints.discard_incomplete(checkpoints) == [] and not (checkpoints / ".writing").exists()
