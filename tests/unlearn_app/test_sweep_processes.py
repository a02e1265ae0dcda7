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


def test_gpus_without_those_gpus_are_refused_before_any_trial(tmp_path, monkeypatch):
    """``gpus: 2`` where no GPU is visible would run two CPU processes (twice the batch): refused in one line before
    any trial or file; two CPU processes are asked for as such (``gpus: 0, processes: 2``)."""
    import unlearn_app.sweep.engine as engine
    from unlearn_app.sweep.engine import SweepError

    def no_trial(*args, **kwargs):
        raise AssertionError("a trial ran")

    for visible, found in (([], "no GPUs"), (["0"], "1 GPU")):
        monkeypatch.setattr(engine, "visible_gpus", lambda visible=visible: visible)
        with pytest.raises(SweepError) as e:
            run_sweep(parse_spec(_spec(resources={"gpus": 2}), "s.yaml"), tmp_path / "out", trial_fn=no_trial)
        assert str(e.value) == (f"s.yaml: resources.gpus is 2, but this machine has {found} visible; run it where 2 "
                                "are, or for 2 CPU processes write resources: {gpus: 0, processes: 2} (each takes a "
                                "batch of every step)")
        assert not (tmp_path / "out").exists()
    monkeypatch.setattr(engine, "visible_gpus", lambda: ["0", "1"])
    seen = []
    run_sweep(parse_spec(_spec(resources={"gpus": 2}), "s.yaml"), tmp_path / "ok", log=lambda _: None,
              trial_fn=lambda *a, **kw: seen.append(kw) or {"id": a[0]["id"], "status": "ok"})
    assert seen == [{"processes": 2}]


def test_the_trial_id_covers_the_process_count_above_one():
    """Two processes give other weights than one (each takes a batch of every step), so --resume may not take one's
    record for the other; a one-process trial keeps the id it had before the count was recorded."""
    one, given_one, two, three = (parse_spec(_spec(resources=r)).trials[0].id
                                  for r in ({}, {"processes": 1}, {"processes": 2}, {"processes": 3}))
    assert one == given_one and len({one, two, three}) == 3
    assert one == "npo-8dcc957c97"  # the id this spec had before the count was recorded (computed with that code)


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
