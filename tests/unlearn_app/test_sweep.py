"""`unlearn sweep`: the spec (validation, deterministic trials), the default engine (results stream, failed trials,
Ctrl-C and --resume), the leaderboard against the trials' own results files, and the Ray engine in local mode."""

from __future__ import annotations

import json
import math
import statistics
import sys

import pytest
import yaml

from harness_ext.results import load_results
from unlearn_app.sweep.engine import SweepError, read_records, run_sweep
from unlearn_app.sweep.leaderboard import pareto_front, write_leaderboard
from unlearn_app.sweep.spec import SpecError, parse_spec
from unlearn_app.sweep.trial import run_trial

TASK = "tofu_forget01_likelihood"


def _spec_text(model="m", data_dir="d", **over) -> str:
    spec = {"model": str(model), "data": "demo", "data_dir": str(data_dir), "forget": "forget01", "seeds": [0, 1],
            "run": {"epochs": 1, "batch_size": 4, "lora": False, "max_length": 64},
            "methods": {"graddiff": {"grid": {"lr": ["1e-3", "1e-2"]}},
                        "idk": {"grid": {"idk_file": ["/nonexistent/idk.txt"]}}},
            "evaluation": {"tasks": [TASK], "limit": 4, "metadata": {"data_dir": str(data_dir)},
                           "checks": [f"{TASK}/forget_prob <= 1"]},
            "select": f"{TASK}/forget_prob:min", "select_if": [f"{TASK}/retain_prob >= 0"],
            "pareto": {"utility": f"{TASK}/retain_prob:max", "forget": f"{TASK}/forget_prob:min"}}
    spec.update(over)
    return yaml.safe_dump(spec, sort_keys=False)


# --------------------------------------------------------------------------- the spec
def test_trials_are_the_product_typed_and_stable():
    spec = parse_spec(_spec_text())
    assert len(spec.trials) == (2 + 1) * 2  # graddiff: 2 lr x 2 seeds; idk: 1 setting x 2 seeds
    graddiff = [t for t in spec.trials if t.method == "graddiff"]
    assert [(t.values["lr"], t.seed) for t in graddiff] == [(0.001, 0), (0.001, 1), (0.01, 0), (0.01, 1)]
    assert [t.id for t in parse_spec(_spec_text()).trials] == [t.id for t in spec.trials]  # same spec, same ids
    assert graddiff[0].setting == graddiff[1].setting != graddiff[2].setting  # seeds share a setting
    assert len({t.id for t in spec.trials}) == 6
    changed = parse_spec(_spec_text(run={"epochs": 2, "batch_size": 4, "lora": False, "max_length": 64}))
    assert not {t.id for t in changed.trials} & {t.id for t in spec.trials}  # a changed option is another trial


def test_random_search_draws_reproducibly_within_the_space():
    body = {"random": {"trials": 5, "seed": 3, "space": {"beta": {"low": 0.01, "high": 1.0, "log": True},
                                                         "alpha": [0.5, 1.0], "lora_r": {"low": 2, "high": 16}}}}
    text = _spec_text(methods={"npo": body}, seeds=[0])
    a, b = parse_spec(text).trials, parse_spec(text).trials
    assert [t.values for t in a] == [t.values for t in b] and len(a) == 5
    for t in a:
        assert 0.01 <= t.params["beta"] <= 1.0 and t.params["alpha"] in (0.5, 1.0)
        assert isinstance(t.run["lora_r"], int) and 2 <= t.run["lora_r"] <= 16
    assert len({t.params["beta"] for t in a}) == 5
    other = parse_spec(_spec_text(methods={"npo": {"random": {**body["random"], "seed": 4}}}, seeds=[0])).trials
    assert [t.values for t in other] != [t.values for t in a]


@pytest.mark.parametrize("over, message", [
    ({"method": "npo"}, ":37: method: unknown key; the keys are model"),
    ({"methods": {"npo": {"grid": {"bta": [0.1]}}}}, "methods.npo.grid.bta: npo has no parameter 'bta'"),
    ({"methods": {"npo": {"grid": {"beta": [0.1, 0]}}}}, "parameter beta=0.0 is not allowed; expected float > 0"),
    ({"methods": {"nope": {}}}, "methods.nope: unknown method"),
    ({"methods": {"npo": {"grid": {"lr": [-1]}}}}, "--lr must be positive"),
    ({"run": {"seed": 3}}, "run.seed: is set by the sweep"),
    ({"run": {"epoch": 3}}, "run.epoch: unknown `unlearn run` option"),
    ({"seeds": [0, 0]}, "seeds: a seed is listed twice"),
    ({"select": "tofu_forget10/forget_quality:max"}, "names tofu_forget10, which evaluation.tasks does not run"),
    ({"select": f"{TASK}/forget_prob:best"}, "after the colon write max or min"),
    ({"evaluation": {"tasks": [TASK], "checks": [f"{TASK}/forget_prob <= baseline"]}}, "add evaluation.baseline"),
    ({"resources": {"gpu": 1}}, "resources.gpu: unknown key"),
    ({"methods": {"npo": {"random": {"trials": 2, "space": {"beta": {"low": 1, "high": 0.5}}}}}}, "low < high"),
])
def test_spec_errors_name_the_key(over, message):
    with pytest.raises(SpecError, match=None) as e:
        parse_spec(_spec_text(**over) if "method" not in over else _spec_text() + "method: npo\n", "s.yaml")
    assert message in str(e.value) and str(e.value).startswith("s.yaml:")


def test_spec_error_carries_its_line():
    text = _spec_text(methods={"npo": {"grid": {"bta": [0.1]}}})
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "bta" in t)
    with pytest.raises(SpecError, match=rf"s.yaml:{line}: methods.npo.grid.bta"):
        parse_spec(text, "s.yaml")


def test_pareto_front_by_hand():
    points = {"a": (0.9, 0.5), "b": (0.8, 0.2), "c": (0.7, 0.1), "d": (0.6, 0.3), "e": (math.nan, 0.0)}
    # utility max, forget min: a (best utility), b and c trade off; d is dominated by b (0.8 > 0.6, 0.2 < 0.3)
    assert sorted(pareto_front(points, ("max", "min"))) == ["a", "b", "c"]
    assert sorted(pareto_front(points, ("max", "max"))) == ["a"]


# --------------------------------------------------------------------------- the default engine
class Interrupt:
    """Runs the real trial, but raises KeyboardInterrupt (Ctrl-C) when the ``at``-th trial starts."""

    def __init__(self, at: int):
        self.at, self.calls = at, []

    def __call__(self, *args):
        self.calls.append(args[0]["id"])
        if len(self.calls) == self.at:
            raise KeyboardInterrupt
        return run_trial(*args)


@pytest.fixture(scope="module")
def swept(tmp_path_factory, tiny_model_dir, demo_data_dir):
    out = tmp_path_factory.mktemp("sweep") / "out"
    spec_file = out.parent / "spec.yaml"
    spec_file.write_text(_spec_text(tiny_model_dir, demo_data_dir))
    from unlearn_app.sweep.spec import load_spec

    spec = load_spec(spec_file)
    ray_before = "ray" in sys.modules  # another test of the session may have imported it
    first = Interrupt(at=3)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, out, trial_fn=first, log=lambda _: None)
    before = (out / "trials.jsonl").read_text().splitlines()
    second = Interrupt(at=0)
    run_sweep(spec, out, resume=True, trial_fn=second, log=lambda _: None)
    write_leaderboard(spec, out)
    assert ray_before or "ray" not in sys.modules  # nothing of Ray without --engine ray
    return spec, out, first, second, before


@pytest.mark.slow
def test_interrupt_keeps_finished_trials_and_resume_runs_the_rest(swept):
    spec, out, first, second, before = swept
    ids = [t.id for t in spec.trials]
    assert first.calls == ids[:3] and len(before) == 2  # Ctrl-C during the 3rd: two records on disk
    assert second.calls == ids[2:]  # --resume: the interrupted trial again, nothing finished twice
    lines = (out / "trials.jsonl").read_text().splitlines()
    assert lines[:2] == before and len(lines) == 6
    records = read_records(out)
    assert [records[i]["status"] for i in ids] == ["ok"] * 4 + ["failed"] * 2
    assert "FileNotFoundError" in records[ids[4]]["error"] or "idk" in records[ids[4]]["error"]
    assert (out / "trials" / ids[4] / "error.txt").is_file()
    again = Interrupt(at=0)
    assert run_sweep(spec, out, resume=True, trial_fn=again, log=lambda _: None) == [] and again.calls == []
    with pytest.raises(SweepError, match="holds a sweep"):
        run_sweep(spec, out, trial_fn=again, log=lambda _: None)


@pytest.mark.slow
def test_leaderboard_numbers_are_the_trials_results_files(swept):
    spec, out, *_ = swept
    board = json.loads((out / "leaderboard.json").read_text())
    files = {r["id"]: load_results(out / r["results_file"])[TASK] for r in read_records(out).values()
             if r["status"] == "ok"}
    assert len(files) == 4 and board["counts"] == {"trials": 6, "finished": 6, "ok": 4, "failed": 2}
    by_setting = {}
    for t in spec.trials:
        if t.id in files:
            by_setting.setdefault(t.setting, []).append(files[t.id])
    for row in board["settings"]:
        runs = by_setting[row["setting"]]
        for metric in ("forget_prob", "retain_prob"):
            assert row["metrics"][TASK][metric] == pytest.approx(statistics.fmean(r[metric] for r in runs), abs=0)
        assert row["score"]["mean"] == pytest.approx(statistics.fmean(r["forget_prob"] for r in runs), abs=0)
        assert row["score"]["sd"] == pytest.approx(statistics.stdev(r["forget_prob"] for r in runs), abs=0)
    # one row for graddiff: its setting with the lower mean forget_prob; idk failed, so it has no row
    (row,) = board["leaderboard"]
    means = {s: statistics.fmean(r["forget_prob"] for r in v) for s, v in by_setting.items()}
    assert row["setting"] == min(means, key=means.get)
    points = {i: (f["retain_prob"], f["forget_prob"]) for i, f in files.items()}
    assert board["pareto_points"] == {i: list(p) for i, p in points.items()}
    assert sorted(board["pareto_front"]) == sorted(pareto_front(points, ("max", "min")))
    md = (out / "leaderboard.md").read_text()
    assert f"| graddiff | lr={row['values']['lr']} | 2 |" in md and "leaderboard.png" in md
    html = (out / "leaderboard.html").read_text()
    assert 'id="leaderboard"' in html and "data:image/png;base64," in html and 'id="provenance"' in html
    assert (out / "leaderboard.png").stat().st_size > 1000


# --------------------------------------------------------------------------- Ray (local mode)
class DieOnce:
    """A Ray task body: the worker process of ``victim``'s first attempt dies mid-run (os._exit, like an OOM kill);
    the marker file says it happened."""

    def __init__(self, victim: str, marker: str):
        self.victim, self.marker = victim, marker

    def __call__(self, *args):
        import os
        from pathlib import Path

        if args[0]["id"] == self.victim and not Path(self.marker).exists():
            Path(self.marker).write_text(str(os.getpid()))
            os._exit(1)
        return run_trial(*args)


@pytest.mark.slow
def test_ray_engine_gives_the_same_numbers_and_retries_a_killed_trial(swept, tmp_path):
    ray = pytest.importorskip("ray")
    from ray import cloudpickle

    spec, local_out, *_ = swept
    local = read_records(local_out)
    graddiff = [t for t in spec.trials if t.method == "graddiff"][:2]  # two trials: Ray startup is the cost
    from unlearn_app.sweep.spec import Spec

    small = Spec(spec.path, spec.text, spec.data, graddiff, spec.evaluation, spec.select, spec.pareto,
                 {**spec.resources, "max_retries": 1})
    marker = tmp_path / "killed"
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test module
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        run_sweep(small, tmp_path / "ray", engine="ray", trial_fn=DieOnce(graddiff[1].id, str(marker)),
                  log=lambda _: None)
    finally:
        ray.shutdown()
    assert marker.is_file(), read_records(tmp_path / "ray")  # the second trial's first worker died ...
    remote = read_records(tmp_path / "ray")
    for t in graddiff:  # ... was retried, and every trial gives the default engine's numbers
        assert remote[t.id]["status"] == "ok" and remote[t.id]["engine"] == "ray"
        assert remote[t.id]["metrics"] == local[t.id]["metrics"]
    assert remote[graddiff[1].id]["pid"] != int(marker.read_text())


# --------------------------------------------------------------------------- the command
def test_cli_names_a_spec_error_before_any_trial(tmp_path):
    from fixtures.commands import run_command

    spec = tmp_path / "bad.yaml"
    spec.write_text(_spec_text(methods={"npo": {"grid": {"beta": [0.1, -1]}}}))
    proc = run_command(["unlearn", "sweep", str(spec), "--out", str(tmp_path / "out")])
    assert proc.returncode == 2 and "methods.npo: Method 'npo': parameter beta=-1.0 is not allowed" in proc.stderr
    assert not (tmp_path / "out").exists()  # nothing ran, nothing written


@pytest.mark.slow
def test_cli_runs_a_one_trial_sweep(tmp_path, tiny_model_dir, demo_data_dir):
    from fixtures.commands import run_command

    spec = tmp_path / "one.yaml"
    spec.write_text(_spec_text(tiny_model_dir, demo_data_dir, methods={"graddiff": {}}, seeds=[0]))
    out = tmp_path / "out"
    proc = run_command(["unlearn", "sweep", str(spec), "--out", str(out)], env={"OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "1 trials, 0 already finished, 1 to run (local)" in proc.stdout
    (record,) = read_records(out).values()
    assert record["status"] == "ok" and record["checks"][0]["passed"] is True
    board = json.loads((out / "leaderboard.json").read_text())
    assert board["leaderboard"][0]["trials"] == [record["id"]]
    proc = run_command(["unlearn", "sweep", str(spec), "--out", str(out)])
    assert proc.returncode == 2 and "pass --resume to continue it" in proc.stderr


def test_the_example_spec_is_24_trials():
    from pathlib import Path

    from unlearn_app.sweep.spec import load_spec

    spec = load_spec(Path(__file__).resolve().parents[2] / "examples" / "sweep" / "tiny-demo.yaml")
    assert len(spec.trials) == 6 * 2 * 2 and {t.method for t in spec.trials} == {"ga", "graddiff", "npo", "simnpo",
                                                                                 "idk", "dpo"}


# --------------------------------------------------------------------------- attacks per trial
def test_attack_spec_errors():
    with pytest.raises(SpecError, match="attacks.quantize.bits: must be one of 4, 8, got 3"):
        parse_spec(_spec_text(attacks={"quantize": {"bits": 3}}))
    lora = {"epochs": 1, "lora": True}
    with pytest.raises(SpecError, match="attacks.quantize: quantizes full weights: add merge: true"):
        parse_spec(_spec_text(run=lora, attacks={"quantize": {"bits": 4}}))
    spec = parse_spec(_spec_text(run={**lora, "merge": True}, attacks={"quantize": {"bits": 4}}))
    assert spec.attacks == {"quantize": {"bits": 4, "group_size": None}}


@pytest.mark.slow
def test_a_quantized_copy_of_each_trial_is_evaluated(tmp_path, tiny_model_dir, demo_data_dir):
    from unlearn_app.sweep.spec import load_spec

    spec_file = tmp_path / "attack.yaml"
    spec_file.write_text(_spec_text(tiny_model_dir, demo_data_dir, methods={"graddiff": {}}, seeds=[0],
                                    attacks={"quantize": {"bits": 4, "group_size": 16}}))
    spec = load_spec(spec_file)
    out = tmp_path / "out"
    (record,) = run_sweep(spec, out, log=lambda _: None)
    assert record["status"] == "ok", record.get("error")
    attacked = record["attacks"]["quantize"]
    assert attacked["metrics"] == load_results(out / attacked["results_file"])
    assert json.loads((out / "trials" / record["id"] / "attack-quantize" / "quantization.json").read_text())["bits"] == 4
    assert attacked["metrics"][TASK]["forget_prob"] != record["metrics"][TASK]["forget_prob"]  # the weights changed
    write_leaderboard(spec, out)
    (row,) = json.loads((out / "leaderboard.json").read_text())["leaderboard"]
    assert row["forget after quantize"]["mean"] == attacked["metrics"][TASK]["forget_prob"]
    assert "forget after quantize" in (out / "leaderboard.md").read_text()


def test_evaluation_during_unlearning_passes_to_every_trial():
    run = {"epochs": 1, "eval_every": 2, "select": f"{TASK}/forget_prob:min"}
    spec = parse_spec(_spec_text(run=run))
    config = spec.trial_config(spec.trials[0], "o")
    assert config["eval_every"] == 2 and config["select"] == f"{TASK}/forget_prob:min"
    assert config["eval_tasks"] == [TASK] and config["eval_limit"] == 4
    with pytest.raises(SpecError, match="--select needs --eval-every"):
        parse_spec(_spec_text(run={"select": f"{TASK}/forget_prob:min"}))


@pytest.mark.parametrize("config", [{"method": "nope"}, {}], ids=["failed trial", "bad config"])
def test_a_trial_leaves_the_callers_torch_threads_as_they_were(tmp_path, config):
    """The default engine runs trials in the caller's process (a test session, a notebook): a trial's thread count
    must not stay behind, or every later computation there runs on other threads and gives other float sums."""
    import torch

    before = torch.get_num_threads()
    record = run_trial({"id": "t"}, config, [], None, str(tmp_path / "t"), threads=before + 1)
    assert record["status"] == "failed" and record["error"]  # the trial ran (and failed) under its own threads
    assert torch.get_num_threads() == before
