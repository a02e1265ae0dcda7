"""A sharded run killed while its processes write a checkpoint (each its own part): ``accelerate launch`` with the
documented FSDP2 config on 2 CPU processes (the test-only shim :mod:`fixtures.fsdp_on_cpu`), the whole launch
SIGKILLed (as a preemption or the OOM killer's cleanup does) while process 1 is in the middle of checkpoint 3's
optimizer state (the probe of :mod:`fixtures.process_probes` stalls it there: no timing). Checkpoint 3 is nowhere a
resume looks, checkpoint 2 holds every process's part (renamed into place only once all are written), and
``--resume`` says it skips checkpoint 3 and takes the steps of one process from checkpoint 2."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
import torch

from fixtures.commands import launch, launch_command
from fixtures.weights import update_difference

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
FSDP_CONFIG = str(REPO / "examples" / "scaling" / "fsdp-8b.yaml")
FSDP_ON_CPU = str(REPO / "tests" / "fixtures" / "fsdp_on_cpu.py")


def _run(model: Path, data: Path, out: Path, *extra: str) -> list[str]:
    return ["unlearn", "run", "--method", "graddiff", "--full", "--model", str(model), "--dtype", "auto", "--data",
            "demo", "--data-dir", str(data), "--forget", "forget01", "--retain", "retain99", "--lr", "1e-3",
            "--epochs", "2", "--save-steps", "1", "--quiet", "--out", str(out), *extra]


def test_a_sharded_run_killed_mid_checkpoint_resumes_from_the_complete_one_before(tiny_model_dir, demo_data_dir,
                                                                                  tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from unlearn_app.cli import main

    tiny64 = tmp_path / "tiny64"  # float64: the sharded steps equal one process's up to summation order
    AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float64).save_pretrained(tiny64)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(tiny64)
    out, stalled = tmp_path / "sharded", tmp_path / "stalled"
    command, env = launch_command(_run(tiny64, demo_data_dir, out, "--batch-size", "2"), processes=2,
                                  config_file=FSDP_CONFIG, script=FSDP_ON_CPU,
                                  env={"PROBE_STALL_CHECKPOINT": "3", "PROBE_STALL_PROCESS": "1",
                                       "PROBE_STALLED": str(stalled), "PROBE_RNG_AFTER_RENAME": "2"})
    with open(tmp_path / "stderr", "w") as stderr:
        launcher = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr,
                                    start_new_session=True)  # its own process group: the launcher and both processes
        try:
            while not stalled.exists() and launcher.poll() is None:  # waits for the stall (or the launch's end)
                time.sleep(0.05)
            assert stalled.read_text() == "1\n", (tmp_path / "stderr").read_text()[-3000:]
        finally:
            # torch's launcher starts each process in a session of its own: kill them by the launcher's family
            family = psutil.Process(launcher.pid).children(recursive=True)
            os.killpg(launcher.pid, signal.SIGKILL)
            for process in family:
                try:
                    process.kill()
                except psutil.NoSuchProcess:
                    pass
            launcher.wait()
            psutil.wait_procs(family, timeout=30)
    checkpoints = out.with_name("sharded.partial") / "checkpoints"
    assert sorted(p.name for p in checkpoints.iterdir()) == [".writing", "checkpoint-1", "checkpoint-2"]
    staged = checkpoints / ".writing" / "checkpoint-3"  # both processes' weights, process 1's optimizer half-written
    assert sorted(p.name for p in (staged / "pytorch_model_fsdp_0").glob("*.distcp")) == ["__0_0.distcp",
                                                                                         "__1_0.distcp"]
    assert (staged / "optimizer.pt").read_bytes() == b"PK\x03\x04"
    # the one before: every process's part and RNG state (process 1's written as late as a rename would allow)
    for part in ("pytorch_model_fsdp_0", "optimizer_0"):
        assert sorted(p.name for p in (checkpoints / "checkpoint-2" / part).glob("*.distcp")) == ["__0_0.distcp",
                                                                                                 "__1_0.distcp"]
    assert sorted(p.name for p in (checkpoints / "checkpoint-2").glob("rng_state_*")) == ["rng_state_0.pth",
                                                                                       "rng_state_1.pth"]

    done = launch(_run(tiny64, demo_data_dir, out, "--batch-size", "2", "--resume"), processes=2,
                  config_file=FSDP_CONFIG, script=FSDP_ON_CPU, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert ("--resume: skipped checkpoint-3, left incomplete by a run stopped while writing it; continuing from "
            "checkpoint-2.") in done.stderr.splitlines()
    one = tmp_path / "one"
    assert main(_run(tiny64, demo_data_dir, one, "--batch-size", "2", "--grad-accum", "2")[1:]) == 0
    difference, update = update_difference(tiny64, one, out)
    assert update > 1e-2 and difference <= 1e-5
