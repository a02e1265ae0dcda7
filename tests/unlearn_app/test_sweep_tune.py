"""`unlearn sweep --engine ray` with `early_stop`: trials as Ray Tune trials reporting their evaluation-during-
unlearning rows, stopped by a Tune stopper (Ray in local mode, tiny model); the spec's early_stop key."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from unlearn_app.sweep.engine import SweepError, read_records, run_sweep
from unlearn_app.sweep.leaderboard import write_leaderboard
from unlearn_app.sweep.spec import SpecError, parse_spec
from unlearn_app.sweep.tune_engine import fires, stop_rule, stopped_record

TASK = "tofu_forget01_likelihood"


def _spec_text(model="m", data_dir="d", early_stop=None, **over) -> str:
    spec = {"model": str(model), "data": "demo", "data_dir": str(data_dir), "forget": "forget01", "seeds": [0, 1],
            "run": {"epochs": 2, "batch_size": 4, "lora": False, "max_length": 64, "lr": 1e-3, "eval_every": 1},
            "methods": {"graddiff": {}},
            "evaluation": {"tasks": [TASK], "limit": 4, "metadata": {"data_dir": str(data_dir)}},
            "select": f"{TASK}/forget_prob:min",
            "pareto": {"utility": f"{TASK}/retain_prob:max", "forget": f"{TASK}/forget_prob:min"}}
    if early_stop is not None:
        spec["early_stop"] = early_stop
    spec.update(over)
    return yaml.safe_dump(spec, sort_keys=False)


# --------------------------------------------------------------------------- the spec and the rule
@pytest.mark.parametrize("early_stop, message", [
    ({"metric": f"{TASK}/retain_prob"}, "give below: X and/or above: Y"),
    ({"metric": "tofu_forget10/model_utility", "below": 0.3}, "which evaluation.tasks does not run"),
    ({"metric": "model_utility", "below": 0.3}, "expected TASK/METRIC"),
    ({"metric": f"{TASK}/retain_prob", "below": "low"}, "early_stop.below: expected a number"),
    ({"metric": f"{TASK}/retain_prob", "floor": 0.3}, "early_stop.floor: unknown key"),
])
def test_early_stop_errors_name_the_key(early_stop, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(_spec_text(early_stop=early_stop))


def test_early_stop_needs_evaluation_during_unlearning():
    run = {"epochs": 2, "batch_size": 4, "lora": False}
    with pytest.raises(SpecError, match="add eval_every: N"):
        parse_spec(_spec_text(early_stop={"metric": f"{TASK}/retain_prob", "below": 0.3}, run=run))


def test_early_stop_is_parsed_and_leaves_the_trials_unchanged():
    plain = parse_spec(_spec_text())
    spec = parse_spec(_spec_text(early_stop={"metric": f"{TASK}/retain_prob", "below": 0.3}))
    assert plain.early_stop is None
    assert spec.early_stop == {"metric": f"{TASK}/retain_prob", "below": 0.3, "above": None}
    assert [t.id for t in spec.trials] == [t.id for t in plain.trials]  # the rule does not change what a trial runs


def test_the_default_engine_refuses_early_stop(tmp_path):
    spec = parse_spec(_spec_text(early_stop={"metric": f"{TASK}/retain_prob", "below": 0.3}))
    with pytest.raises(SweepError, match="run with --engine ray"):
        run_sweep(spec, tmp_path / "out", log=lambda _: None)
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_the_rule_by_hand():
    rule = {"metric": "t/u", "below": 0.3, "above": None}
    assert fires(rule, {"t/u": 0.29}) and not fires(rule, {"t/u": 0.3}) and not fires(rule, {"t/u": 0.9})
    assert not fires(rule, {"t/u": math.nan}) and not fires(rule, {"step": 3}) and not fires(rule, {"record": "{}"})
    both = {"metric": "t/f", "below": 0.1, "above": 0.8}
    assert fires(both, {"t/f": 0.05}) and fires(both, {"t/f": 0.81}) and not fires(both, {"t/f": 0.5})
    assert stop_rule(both) == "t/f < 0.1 or t/f > 0.8" and stop_rule(rule) == "t/u < 0.3"
    trial = parse_spec(_spec_text()).trials[0]
    record = stopped_record(trial, rule, {"step": 2, "epoch": 1.0, "t/u": 0.25, "t/v": 0.5, "time_total_s": 3.456,
                                          "hostname": "h", "pid": 7, "training_iteration": 3})
    assert record["status"] == "stopped" and record["id"] == trial.id
    assert record["stopped"] == {"rule": "t/u < 0.3", "step": 2, "epoch": 1.0, "value": 0.25}
    assert record["metrics"] == {"t": {"u": 0.25, "v": 0.5}} and record["wall_s"] == 3.46


# --------------------------------------------------------------------------- Ray Tune (local mode)
@pytest.fixture(scope="module")
def ray_local():
    ray = pytest.importorskip("ray")
    pytest.importorskip("ray.tune")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _rows(out, trial_id) -> list[dict]:
    """A trial's evaluation rows: in its checkpoint folder, or in the unfinished one a stopped trial leaves."""
    from unlearn_methods.checkpoint_folder import partial_path

    model = out / "trials" / trial_id / "model"
    path = (model if model.is_dir() else partial_path(model)) / "eval_during_training.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_a_rule_that_fires_stops_the_trial_before_its_last_step(ray_local, tmp_path, tiny_model_dir, demo_data_dir):
    # forget_prob is a probability: it is always below 2, so the rule fires on the first row (step 0)
    rule = {"metric": f"{TASK}/forget_prob", "below": 2.0}
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(_spec_text(tiny_model_dir, demo_data_dir, early_stop=rule, seeds=[0]))
    from unlearn_app.sweep.spec import load_spec

    spec = load_spec(spec_file)
    out = tmp_path / "tune"
    run_sweep(spec, out, engine="ray", log=lambda _: None)
    (trial,) = spec.trials
    record = read_records(out)[trial.id]
    rows = _rows(out, trial.id)
    assert record["status"] == "stopped" and record["engine"] == "ray-tune"
    assert record["stopped"]["step"] == 0 and record["stopped"]["rule"] == f"{TASK}/forget_prob < 2"
    assert [r["step"] for r in rows] == [0]  # 6 forget rows, batch 4, 2 epochs: 4 steps; it trained none
    assert record["stopped"]["value"] == rows[0][f"{TASK}/forget_prob"] == record["metrics"][TASK]["forget_prob"]
    assert not (out / "trials" / trial.id / "model" / "eval").exists()  # no final checkpoint evaluated
    write_leaderboard(spec, out)
    board = json.loads((out / "leaderboard.json").read_text())
    assert board["counts"]["stopped"] == 1 and board["counts"]["ok"] == 0 and board["leaderboard"] == []
    assert f"stopped at step 0: {TASK}/forget_prob < 2" in (out / "leaderboard.md").read_text()
    assert run_sweep(spec, out, engine="ray", resume=True, log=lambda _: None) == []  # a stopped trial is finished


@pytest.mark.slow
def test_a_rule_that_cannot_fire_changes_nothing(ray_local, tmp_path, tiny_model_dir, demo_data_dir):
    rule = {"metric": f"{TASK}/forget_prob", "below": -1.0}  # a probability is never below -1
    plain, stopped = parse_spec(_spec_text(tiny_model_dir, demo_data_dir)), \
        parse_spec(_spec_text(tiny_model_dir, demo_data_dir, early_stop=rule))
    run_sweep(plain, tmp_path / "local", log=lambda _: None)
    run_sweep(stopped, tmp_path / "tune", engine="ray", log=lambda _: None)
    local, tune = read_records(tmp_path / "local"), read_records(tmp_path / "tune")
    assert len(local) == len(tune) == 2
    for trial in stopped.trials:
        assert local[trial.id]["status"] == tune[trial.id]["status"] == "ok"
        assert tune[trial.id]["engine"] == "ray-tune" and local[trial.id]["engine"] == "local"
        assert tune[trial.id]["metrics"] == local[trial.id]["metrics"]  # the same numbers
        assert _rows(tmp_path / "tune", trial.id) == _rows(tmp_path / "local", trial.id)
        assert [r["step"] for r in _rows(tmp_path / "tune", trial.id)] == [0, 1, 2, 3, 4]  # every step evaluated


def test_the_smollm2_example_spec_is_6_methods_x_2_learning_rates_x_2_seeds():
    from pathlib import Path

    from unlearn_app.sweep.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[2] / "examples" / "sweep" / "smollm2-demo.yaml")
    assert len(spec.trials) == 24 and {t.method for t in spec.trials} == {"ga", "graddiff", "npo", "simnpo", "idk",
                                                                          "dpo"}
    assert {t.run["lr"] for t in spec.trials} == {1e-4, 1e-3} and {t.seed for t in spec.trials} == {0, 1}
    assert all(t.run["lora"] for t in spec.trials) and spec.early_stop is None
