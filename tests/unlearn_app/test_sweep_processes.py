"""Sweep trials on several processes: ``resources.processes`` (or ``gpus`` of 2 or more) runs each trial's
`unlearn run` under ``accelerate launch``; its weights are those of one process with the processes' batch."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from safetensors.torch import load_file

from unlearn_app.sweep.engine import run_sweep
from unlearn_app.sweep.spec import SpecError, parse_spec
from unlearn_app.sweep.trial import trial_options

TASK = "tofu_forget01_likelihood"


def _spec(model="m", data_dir="d", batch_size=4, **over) -> str:
    spec = {"model": str(model), "data": "demo", "data_dir": str(data_dir), "forget": "forget01", "retain": "retain99",
            "seeds": [0], "run": {"epochs": 1, "batch_size": batch_size, "lora": False, "lr": 1e-3},
            "methods": {"npo": {}}}
    spec.update(over)
    return yaml.safe_dump(spec, sort_keys=False)


@pytest.mark.parametrize("resources, processes", [
    ({}, 1), ({"gpus": 1}, 1), ({"gpus": 0.5}, 1), ({"gpus": 2}, 2), ({"gpus": 4, "processes": 4}, 4),
    ({"processes": 2}, 2), ({"cpus": 4, "processes": 3}, 3),
])
def test_processes_come_from_gpus_or_are_given(resources, processes):
    spec = parse_spec(_spec(resources=resources))
    assert spec.resources["processes"] == processes
    assert trial_options(spec.resources) == ({"processes": processes} if processes > 1 else {})


@pytest.mark.parametrize("over, message", [
    ({"resources": {"gpus": 2.5}}, "resources.gpus: 2.5: above 1, give a whole number of GPUs"),
    ({"resources": {"gpus": 1, "processes": 2}}, "resources.processes: 2 processes on 1 GPUs: a trial's processes take "
                                                 "one GPU each; give processes: 1"),
    ({"resources": {"gpus": 2, "processes": 4}}, "give processes: 2"),
    ({"resources": {"processes": 0}}, "resources.processes"),
    ({"resources": {"processes": 2}, "run": {"epochs": 1, "eval_every": 1}, "evaluation": {"tasks": [TASK]},
      "early_stop": {"metric": f"{TASK}/forget_prob", "below": 0.1}},
     "early_stop: reports the evaluation rows of a trial running in one process; with resources.processes 2"),
])
def test_bad_process_counts_name_the_key(over, message):
    with pytest.raises(SpecError) as e:
        parse_spec(_spec(**over), "s.yaml")
    assert message in str(e.value) and str(e.value).startswith("s.yaml:")


@pytest.mark.slow
def test_a_trial_on_two_processes_ends_in_the_weights_of_one(tiny_model_dir, demo_data_dir, tmp_path):
    """One NPO trial (a reference model, paired retain rows) with ``processes: 2`` and batch 2 per process, against
    the same trial in one process with batch 4."""
    specs = {name: parse_spec(_spec(tiny_model_dir, demo_data_dir, batch_size=batch, resources=resources),
                              str(tmp_path / f"{name}.yaml"))
             for name, batch, resources in (("two", 2, {"processes": 2, "cpus": 2}), ("one", 4, {}))}
    records = {name: run_sweep(spec, tmp_path / name, log=lambda _: None) for name, spec in specs.items()}
    (two,), (one,) = records["two"], records["one"]
    assert two["status"] == one["status"] == "ok", (two.get("error"), one.get("error"))
    assert two["processes"] == 2 and "processes" not in one
    folder = {name: tmp_path / name / "trials" / records[name][0]["id"] for name in specs}
    assert (folder["two"] / "launch.log").is_file() and not (folder["one"] / "launch.log").exists()
    base, w1, w2 = ({k: v.double() for k, v in load_file(str(d / "model.safetensors")).items()}
                    for d in (tiny_model_dir, folder["one"] / "model", folder["two"] / "model"))
    update = torch.sqrt(sum(((w1[k] - base[k]) ** 2).sum() for k in base))
    assert update > 1e-3  # the trial moved the weights
    assert torch.sqrt(sum(((w2[k] - w1[k]) ** 2).sum() for k in base)) / update <= 1e-4
    losses = [[row["loss"] for row in json.loads((folder[n] / "model" / "train_metrics.json").read_text())["log_history"]
               if "loss" in row] for n in ("one", "two")]
    assert losses[1] == pytest.approx(losses[0], rel=1e-4)


def test_a_launched_run_that_fails_raises_its_error_line(monkeypatch, tmp_path):
    """The command given to ``accelerate launch`` and, when it fails, the run's own one-line error in the message."""
    import subprocess

    from unlearn_app.sweep.trial import launch_run
    from unlearn_methods.training import UnlearningFailed

    seen = {}

    def fake_run(command, stdout, stderr, env):
        seen.update(command=command, env=env)
        stdout.write("Traceback noise\nerror: --forget forget01: no such split\nW1126 a launcher warning\n")
        return subprocess.CompletedProcess(command, 2)

    monkeypatch.setattr(subprocess, "run", fake_run)
    config = {"method": "ga", "model": "m", "forget": "forget01", "out": str(tmp_path / "model"), "eval_tasks": None}
    with pytest.raises(UnlearningFailed, match=r"^unlearn run on 3 processes exited with 2: --forget forget01: no such "
                                               r"split \(output: .*launch.log\)$"):
        launch_run(config, tmp_path, processes=3, threads=6)
    command = seen["command"]
    assert command[command.index("--num_processes") + 1] == "3"
    assert command[-4:] == ["unlearn_app", "run", "--config", str(tmp_path / "run.yaml")]
    assert seen["env"]["OMP_NUM_THREADS"] == "2"  # the trial's threads shared by its processes
    assert yaml.safe_load((tmp_path / "run.yaml").read_text()) == {k: v for k, v in config.items() if v is not None}
