"""`unlearn sweep`'s extensions: the relearning attack per trial, `unlearn ci --from-sweep`, sequential and
forget-size stages, KLoM ensembles and the default engine's devices."""

from __future__ import annotations

import json
import statistics

import pytest
from test_sweep import TASK, _spec_text

from harness_ext.results import load_results
from unlearn_app.reports.numbers import format_number
from unlearn_app.sweep.engine import run_sweep
from unlearn_app.sweep.leaderboard import write_leaderboard
from unlearn_app.sweep.spec import SpecError, parse_spec


def test_relearn_attack_spec():
    full = {"epochs": 1, "lora": False}
    spec = parse_spec(_spec_text(run=full, attacks={"relearn": {"steps": 3, "lr": "1e-4"}}))
    assert spec.attacks == {"relearn": {"steps": 3, "lr": 1e-4, "batch_size": 4, "relearn_fraction": None,
                                        "relearn_data": None, "seed": None}}
    for attacks, message in [({"relearn": {"stepz": 3}}, "attacks.relearn.stepz: unknown key"),
                             ({"relearn": {"relearn_fraction": 1.5}}, "attacks.relearn.relearn_fraction: must be > 0, < 1"),
                             ({"relearn": {"lr": 0}}, "attacks.relearn.lr: must be > 0, got 0"),
                             ({"relearn": {"steps": 0}}, "attacks.relearn.steps: must be >= 1, got 0"),
                             ({"relearn": {"relearn_data": "/nonexistent.jsonl"}},
                              "attacks.relearn.relearn_data: /nonexistent.jsonl is not a file"),
                             ({"jailbreak": {}}, "attacks: expected {quantize")]:
        with pytest.raises(SpecError, match=None) as e:
            parse_spec(_spec_text(run=full, attacks=attacks))
        assert message in str(e.value)
    with pytest.raises(SpecError, match="attacks.relearn: fine-tunes full weights: add merge: true"):
        parse_spec(_spec_text(run={"epochs": 1, "lora": True}, attacks={"relearn": {}}))


@pytest.mark.slow
def test_a_relearned_copy_of_each_trial_is_measured_and_shown_beside_its_row(tmp_path, tiny_model_dir, demo_data_dir):
    from unlearn_app.sweep.spec import load_spec

    spec_file = tmp_path / "relearn.yaml"
    spec_file.write_text(_spec_text(tiny_model_dir, demo_data_dir, methods={"graddiff": {}}, seeds=[0, 1],
                                    attacks={"relearn": {"steps": 2, "lr": 1e-3, "batch_size": 2}}))
    spec = load_spec(spec_file)
    out = tmp_path / "out"
    records = run_sweep(spec, out, log=lambda _: None)
    recoveries = []
    for record in records:
        assert record["status"] == "ok", record.get("error")
        attacked = record["attacks"]["relearn"]
        home = out / "trials" / record["id"] / "attack-relearn"
        saved = json.loads((home / "relearn.json").read_text())  # `unlearn attack relearn`'s own record
        assert saved["seed"] == record["seed"] == attacked["seed"] and saved["steps"] == 2
        assert attacked["recovery"] == saved["held_out_prob_after"] - saved["held_out_prob_before"] != 0
        assert attacked["metrics"] == load_results(out / attacked["results_file"])  # evaluated like the trial
        recoveries.append(attacked["recovery"])
    write_leaderboard(spec, out)
    (row,) = json.loads((out / "leaderboard.json").read_text())["leaderboard"]
    assert row["relearn recovery"]["mean"] == pytest.approx(statistics.fmean(recoveries), abs=0)
    assert row["relearn recovery"]["sd"] == pytest.approx(statistics.stdev(recoveries), abs=0)
    forget_after = [r["attacks"]["relearn"]["metrics"][TASK]["forget_prob"] for r in records]
    assert row["forget after relearn"]["mean"] == pytest.approx(statistics.fmean(forget_after), abs=0)
    md = (out / "leaderboard.md").read_text()
    assert "| forget after relearn | relearn recovery |" in md
    assert f"{format_number(statistics.fmean(recoveries))} ± {format_number(statistics.stdev(recoveries))}" in md
    assert "relearn recovery" in (out / "leaderboard.html").read_text()


# --------------------------------------------------------------------------- unlearn ci --from-sweep
#: forget_prob by (method, lr, seed), chosen by hand: graddiff lr=0.01 has the lowest mean (0.13), its seed 0 the
#: lowest value (0.10); npo's best seed is seed 0 (0.12)
FORGET = {("graddiff", 0.001, 0): 0.30, ("graddiff", 0.001, 1): 0.20, ("graddiff", 0.01, 0): 0.10,
          ("graddiff", 0.01, 1): 0.16, ("npo", None, 0): 0.12, ("npo", None, 1): 0.18}


@pytest.fixture
def fake_sweep(tmp_path):
    """A finished sweep whose trials' results files hold the numbers of FORGET (no model is trained)."""
    from fixtures.runs import write_results
    from unlearn_app.sweep.engine import append_record

    text = _spec_text(methods={"graddiff": {"grid": {"lr": [1e-3, 1e-2]}}, "npo": {}})
    (tmp_path / "spec.yaml").write_text(text)
    spec = parse_spec(text, str(tmp_path / "spec.yaml"))
    out = tmp_path / "sweep"
    out.mkdir()
    trials = {}
    for trial in spec.trials:
        metrics = {TASK: {"forget_prob": FORGET[(trial.method, trial.values.get("lr"), trial.seed)], "retain_prob": 0.5}}
        path = write_results(out / "trials" / trial.id / "model" / "eval", metrics)
        append_record(out, {**trial.as_dict(), "status": "ok", "metrics": metrics, "checks": [], "passed": True,
                            "results_file": str(path.relative_to(out)), "wall_s": 1.0})
        trials[(trial.method, trial.values.get("lr"), trial.seed)] = trial.id
    write_leaderboard(spec, out)
    return spec, out, trials


def test_best_trial_is_the_best_seed_of_the_best_setting(fake_sweep):
    from unlearn_app.sweep.best import NoTrial, best_trial

    spec, out, trials = fake_sweep
    best = best_trial(out)
    assert best["id"] == trials[("graddiff", 0.01, 0)] and best["selected_by"] == f"{TASK}/forget_prob:min"
    assert best["checkpoint"] == str(out / "trials" / best["id"] / "model")
    assert best_trial(out, "npo")["id"] == trials[("npo", None, 0)]
    with pytest.raises(NoTrial, match="--method idk: the leaderboard of .* has no row for it; its methods: graddiff, npo"):
        best_trial(out, "idk")
    with pytest.raises(NoTrial, match="no leaderboard.json; write it with unlearn sweep SPEC"):
        best_trial(out / "trials")


def test_ci_gates_the_sweeps_selected_trial(fake_sweep, tmp_path, capsys):
    from unlearn_app.cli import main

    spec, out, trials = fake_sweep
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"tasks: [{TASK}]\nchecks:\n  - {TASK}/forget_prob <= 0.11\n")
    assert main(["ci", "--suite", str(suite), "--from-sweep", str(out), "--out", str(tmp_path / "ci")]) == 0
    record = json.loads((tmp_path / "ci" / "results.json").read_text())
    best = trials[("graddiff", 0.01, 0)]
    assert record["sweep"]["id"] == best and record["results"][TASK]["forget_prob"] == 0.10
    assert record["checks"][0]["value"] == 0.10
    assert f"trial `{best}` (graddiff, seed 0)" in (tmp_path / "ci" / "summary.md").read_text()
    # npo's selected trial has forget_prob 0.12: the check fails (exit 1)
    assert main(["ci", "--suite", str(suite), "--from-sweep", str(out), "--method", "npo",
                 "--out", str(tmp_path / "ci-npo")]) == 1
    assert json.loads((tmp_path / "ci-npo" / "results.json").read_text())["sweep"]["id"] == trials[("npo", None, 0)]
    capsys.readouterr()
    assert main(["ci", "--suite", str(suite), "--method", "npo", "--out", str(tmp_path / "x")]) == 2
    assert "--method picks a method of --from-sweep DIR" in capsys.readouterr().err
    assert main(["ci", "--suite", str(suite), "--from-sweep", str(out), "--method", "ga", "--out", str(tmp_path / "x")]) == 2
    assert "--method ga: the leaderboard" in capsys.readouterr().err
    assert main(["ci", "--suite", str(suite), "--from-sweep", str(out), "--out", str(out / "trials.jsonl")]) == 2
    assert "would be read as an input from --from-sweep" in capsys.readouterr().err


def test_ci_evaluate_takes_the_selected_trials_checkpoint(fake_sweep, tmp_path, monkeypatch):
    import unlearn_app.ci.runner as runner
    from unlearn_app.cli import main

    spec, out, trials = fake_sweep
    seen = []
    monkeypatch.setattr(runner, "run_ci", lambda opts: seen.append(opts) or 0)
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"tasks: [{TASK}]\nchecks:\n  - {TASK}/forget_prob <= 0.11\n")
    assert main(["ci", "--suite", str(suite), "--from-sweep", str(out), "--evaluate", "--out", str(tmp_path / "ci")]) == 0
    (opts,) = seen
    best = trials[("graddiff", 0.01, 0)]
    assert opts.model == str(out / "trials" / best / "model") and opts.from_results is None
    assert opts.sweep["id"] == best and opts.sweep["dir"] == str(out)


# --------------------------------------------------------------------------- stages: sequential, forget sizes
FULL = {"epochs": 1, "batch_size": 4, "lora": False, "max_length": 64}


def _sequential(model="m", data_dir="d", **over):
    over = {"run": FULL, "methods": {"graddiff": {"grid": {"lr": [1e-3, 1e-2]}}},
            "stages": {"sequential": ["forget01", "forget05"]}, **over}
    return _spec_text(model, data_dir, **over).replace("forget: forget01\n", "")


def test_sequential_stages_are_chains_with_clear_ids():
    spec = parse_spec(_sequential())
    assert len(spec.trials) == 2 * 2 * 2  # 2 lr x 2 seeds x 2 stages
    chains = [spec.trials[i:i + 2] for i in range(0, 8, 2)]
    for first, second in chains:
        assert (first.stage, first.forget, first.after) == (1, "forget01", None)
        assert (second.stage, second.forget, second.after) == (2, "forget05", first.id)
        assert first.id.endswith("-s1") and second.id == first.id[:-1] + "2"  # one chain, one hash
        assert first.setting != second.setting  # each stage is its own leaderboard row
    assert len({t.id for t in spec.trials}) == 8
    assert [t.id for t in parse_spec(_sequential()).trials] == [t.id for t in spec.trials]
    from unlearn_app.sweep.engine import trial_args, waves

    config = trial_args(spec, chains[0][1], "/sweep")[1]
    assert config["model"] == f"/sweep/trials/{chains[0][0].id}/model" and config["forget"] == "forget05"
    assert trial_args(spec, chains[0][0], "/sweep")[1]["model"] == "m"
    assert [[t.stage for t in w] for w in waves(spec.trials)] == [[1] * 4, [2] * 4]


@pytest.mark.parametrize("text, message", [
    (_sequential() + "forget: forget01\n", "forget: stages.sequential gives the forget splits"),
    (_sequential().replace("- forget05\n", ""), "stages.sequential: give a list of at least two forget splits"),
    (_sequential().replace("lora: false", "lora: true"), "stages.sequential: a stage unlearns the previous stage's"),
    (_spec_text(stages={"folds": 3}), "stages: expected {sequential:"),
])
def test_stage_spec_errors(text, message):
    with pytest.raises(SpecError, match=None) as e:
        parse_spec(text, "s.yaml")
    assert message in str(e.value)


def test_forget_size_scaling_ids_name_the_split():
    spec = parse_spec(_spec_text(forget=["forget01", "forget05"], methods={"graddiff": {}}))
    assert [(t.forget, t.seed) for t in spec.trials] == [("forget01", 0), ("forget01", 1), ("forget05", 0), ("forget05", 1)]
    assert all(t.id.startswith(f"graddiff-{t.forget}-") and t.setting.startswith(f"graddiff-{t.forget}-")
               for t in spec.trials)
    single = parse_spec(_spec_text(methods={"graddiff": {}})).trials[0]
    assert single.id.startswith("graddiff-") and "forget01" not in single.id  # one split: ids as before


def test_a_stage_after_a_failed_stage_is_recorded_not_run(tmp_path):
    spec = parse_spec(_sequential(), str(tmp_path / "s.yaml"))
    chain = spec.trials[:2]
    calls = []

    def fail_first(trial, config, *rest):
        calls.append((trial["id"], config["model"]))
        return {**trial, "status": "failed", "error": "boom", "wall_s": 0.0}

    from unlearn_app.sweep.engine import read_records
    from unlearn_app.sweep.spec import Spec

    small = Spec(spec.path, spec.text, spec.data, chain, spec.evaluation)
    run_sweep(small, tmp_path / "out", trial_fn=fail_first, log=lambda _: None)
    assert calls == [(chain[0].id, "m")]  # the second stage never ran
    second = read_records(tmp_path / "out")[chain[1].id]
    assert second["status"] == "failed" and f"the previous stage {chain[0].id} did not finish ok" in second["error"]


def test_leaderboard_has_a_forget_split_column_with_several_splits(tmp_path):
    from fixtures.runs import write_results
    from unlearn_app.sweep.engine import append_record

    text = _spec_text(forget=["forget01", "forget05"], methods={"graddiff": {}}, seeds=[0])
    spec = parse_spec(text, str(tmp_path / "spec.yaml"))
    out = tmp_path / "sweep"
    out.mkdir()
    for trial, value in zip(spec.trials, (0.25, 0.5)):
        metrics = {TASK: {"forget_prob": value, "retain_prob": 0.5}}
        path = write_results(out / "trials" / trial.id / "model" / "eval", metrics)
        append_record(out, {**trial.as_dict(), "status": "ok", "metrics": metrics, "checks": [], "passed": True,
                            "results_file": str(path.relative_to(out)), "wall_s": 1.0})
    write_leaderboard(spec, out)
    board = json.loads((out / "leaderboard.json").read_text())
    assert [(r["forget_split"], r["score"]["mean"]) for r in board["leaderboard"]] == [("forget01", 0.25),
                                                                                      ("forget05", 0.5)]
    md = (out / "leaderboard.md").read_text()
    assert "| method | setting | forget split | seeds |" in md and "| graddiff | defaults | forget05 | 1 |" in md
    assert f"| {spec.trials[1].id} | graddiff | defaults | forget05 | 0 | ok |" in md
    assert "<th>forget split</th>" in (out / "leaderboard.html").read_text()


@pytest.mark.slow
def test_sequential_stages_unlearn_the_previous_checkpoint(tmp_path, tiny_model_dir, demo_data_dir):
    from unlearn_app.sweep.engine import read_records
    from unlearn_app.sweep.spec import load_spec

    spec_file = tmp_path / "seq.yaml"
    spec_file.write_text(_sequential(tiny_model_dir, demo_data_dir, methods={"graddiff": {}}, seeds=[0]))
    spec = load_spec(spec_file)
    out = tmp_path / "out"
    run_sweep(spec, out, log=lambda _: None)
    first, second = spec.trials
    records = read_records(out)
    assert [records[t.id]["status"] for t in spec.trials] == ["ok", "ok"], records
    ran = json.loads((out / "trials" / second.id / "trial.json").read_text())["config"]
    assert ran["model"] == str((out / "trials" / first.id / "model").resolve()) and ran["forget"] == "forget05"
    assert records[first.id]["metrics"] != records[second.id]["metrics"]  # evaluated after each stage
    write_leaderboard(spec, out)
    board = json.loads((out / "leaderboard.json").read_text())
    assert sorted((r["stage"], r["trials"]) for r in board["leaderboard"]) == [(1, [first.id]), (2, [second.id])]
    md = (out / "leaderboard.md").read_text()
    assert "| method | setting | stage | forget split | seeds |" in md and "| graddiff | defaults | 2 | forget05 | 1 |" in md


# --------------------------------------------------------------------------- KLoM ensembles
def _klom_spec(model="m", data_dir="d", **over):
    over = {"run": FULL, "methods": {"graddiff": {}}, "klom": {"oracle": {"model": str(model), "epochs": 1}}, **over}
    return _spec_text(model, data_dir, **over)


def test_klom_adds_oracle_trials_and_the_margins_task():
    spec = parse_spec(_klom_spec())
    oracles = [t for t in spec.trials if t.oracle]
    assert [(t.method, t.seed, t.run["epochs"], t.id.split("-")[0]) for t in oracles] == [
        ("retain_ft", 0, 1, "oracle"), ("retain_ft", 1, 1, "oracle")]
    assert spec.evaluation.tasks == [TASK, "margins_tofu_forget01"]
    assert spec.trial_config(oracles[0], "o")["eval_tasks"] == [TASK, "margins_tofu_forget01"]
    assert spec.klom == {"task": "margins_tofu_forget01", "oracle_model": "m", "oracle_run": {"epochs": 1},
                         "ulira": True, "split": "forget"}


@pytest.mark.parametrize("over, message", [
    ({"seeds": [0]}, "klom: an ensemble is one model per seed: give at least two seeds"),
    ({"klom": {"oracle": {"epochs": 1}}}, "klom.oracle: give {model: DIR"),
    ({"klom": {"oracle": {"model": "m", "seed": 3}}}, "klom.oracle.seed: not an `unlearn run` option"),
    ({"klom": {"oracle": {"model": "m"}, "task": "tofu_forget01"}}, "klom.task: expected a margins task"),
    ({"klom": {"oracle": {"model": "m"}, "size": 3}}, "klom.size: unknown key"),
    ({"klom": {"oracle": {"model": "m", "lr": -1}}}, "klom.oracle: trial oracle-"),
])
def test_klom_spec_errors(over, message):
    with pytest.raises(SpecError, match=None) as e:
        parse_spec(_klom_spec(**over))
    assert message in str(e.value)


@pytest.mark.slow
def test_klom_and_ulira_of_each_setting_against_oracle_trials(tmp_path, tiny_model_dir, demo_data_dir):
    from unlearn_app.cli import main
    from unlearn_app.sweep.engine import read_records
    from unlearn_app.sweep.spec import load_spec

    spec_file = tmp_path / "klom.yaml"
    spec_file.write_text(_klom_spec(tiny_model_dir, demo_data_dir))
    spec = load_spec(spec_file)
    out = tmp_path / "out"
    run_sweep(spec, out, log=lambda _: None)
    records = read_records(out)
    assert all(r["status"] == "ok" for r in records.values()), records
    write_leaderboard(spec, out)
    board = json.loads((out / "leaderboard.json").read_text())
    (row,) = board["leaderboard"]  # the oracles are no leaderboard row
    assert board["counts"] == {"trials": 4, "finished": 4, "ok": 4, "failed": 0}
    unlearned = [str((out / records[i]["results_file"]).parent) for i in row["trials"]]
    oracles = [str((out / records[t.id]["results_file"]).parent) for t in spec.trials if t.oracle]
    assert sorted(board["klom"]["oracle_trials"]) == sorted(t.id for t in spec.trials if t.oracle)
    # the same numbers as `unlearn klom` / `unlearn ulira` on the trials' lm-eval folders
    assert main(["klom", "--unlearned", *unlearned, "--oracle", *oracles, "--out", str(tmp_path / "k.json"),
                 "--quiet"]) == 0
    assert main(["ulira", "--unlearned", *unlearned, "--oracle", *oracles, "--split", "forget",
                 "--out", str(tmp_path / "u.json"), "--quiet"]) == 0
    by_cli = json.loads((tmp_path / "k.json").read_text())
    assert row["klom"]["splits"] == by_cli["splits"] and set(by_cli["splits"]) >= {"forget", "retain"}
    assert row["KLoM p95"]["mean"] == by_cli["splits"]["forget"]["p95"] >= 0
    assert row["U-LiRA accuracy"]["mean"] == json.loads((tmp_path / "u.json").read_text())["accuracy"]
    assert row["ulira"]["accuracy"] == row["U-LiRA accuracy"]["mean"]
    md = (out / "leaderboard.md").read_text()
    assert "| KLoM p95 | U-LiRA accuracy |" in md and "`forget` split of `margins_tofu_forget01`" in md
    assert set(board["pareto_points"]) == set(row["trials"])  # oracles are no points


# --------------------------------------------------------------------------- the default engine's devices
class Probe:
    """A trial body that records the GPUs its process sees, its pid and when it ran (no training); ``die``: the
    trial whose worker process dies mid-run."""

    def __init__(self, die: str | None = None):
        self.die = die

    def __call__(self, trial, *rest):
        import os
        import time

        if trial["id"] == self.die:
            os._exit(1)
        start = time.time()
        time.sleep(0.5)
        return {**trial, "status": "ok", "metrics": {}, "checks": [], "passed": True, "wall_s": 0.5,
                "seen": os.environ.get("CUDA_VISIBLE_DEVICES"), "pid": os.getpid(), "span": [start, time.time()]}


def test_lanes_and_visible_gpus(monkeypatch):
    import torch

    from unlearn_app.sweep.engine import lanes, visible_gpus

    assert lanes(["0", "1", "2", "3"], 2) == ["0,1", "2,3"] and lanes(["0", "1", "2"], 2) == ["0,1"]
    assert lanes(["0", "1", "2"], 0) == lanes(["0", "1", "2"], 0.5) == ["0", "1", "2"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert visible_gpus() == ["0", "1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert visible_gpus() == ["3", "5"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert visible_gpus() == []


def test_several_gpus_run_one_trial_per_gpu_in_pinned_processes(tmp_path, monkeypatch):
    import os

    import unlearn_app.sweep.engine as engine
    from unlearn_app.sweep.engine import read_records

    monkeypatch.setattr(engine, "visible_gpus", lambda: ["4", "7"])  # a faked two-GPU machine
    spec = parse_spec(_spec_text(methods={"graddiff": {"grid": {"lr": [1e-3, 1e-2]}}}, seeds=[0, 1, 2]))
    victim = spec.trials[2].id
    run_sweep(spec, tmp_path / "out", trial_fn=Probe(die=victim), log=lambda _: None)
    records = read_records(tmp_path / "out")
    assert set(records) == {t.id for t in spec.trials}  # every trial recorded, the dead one too
    assert records[victim]["status"] == "failed" and "BrokenProcessPool" in records[victim]["error"]
    ok = [r for r in records.values() if r["status"] == "ok"]
    assert len(ok) == 5 and all(r["seen"] == r["devices"] and r["engine"] == "local" for r in ok)
    assert {r["seen"] for r in ok} == {"4", "7"}  # both GPUs used, each trial pinned to one
    assert len({r["pid"] for r in ok}) == 5 and os.getpid() not in {r["pid"] for r in ok}  # a fresh process each
    spans = sorted(r["span"] for r in ok)
    assert any(a[1] > b[0] for a, b in zip(spans, spans[1:]))  # two trials ran at the same time


def test_one_gpu_runs_in_this_process(tmp_path, monkeypatch):
    import os

    import unlearn_app.sweep.engine as engine

    monkeypatch.setattr(engine, "visible_gpus", lambda: ["0"])
    spec = parse_spec(_spec_text(methods={"graddiff": {}}, seeds=[0]))
    (record,) = run_sweep(spec, tmp_path / "out", trial_fn=Probe(), log=lambda _: None)
    assert record["pid"] == os.getpid() and "devices" not in record


@pytest.mark.slow
def test_pinned_workers_give_the_numbers_of_this_process(tmp_path, monkeypatch, tiny_model_dir, demo_data_dir):
    import unlearn_app.sweep.engine as engine
    from unlearn_app.sweep.spec import load_spec

    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(_spec_text(tiny_model_dir, demo_data_dir, methods={"graddiff": {}}))
    spec = load_spec(spec_file)
    run_sweep(spec, tmp_path / "here", log=lambda _: None)
    monkeypatch.setattr(engine, "visible_gpus", lambda: ["0", "1"])  # no GPU behind them: the workers use the CPU
    run_sweep(spec, tmp_path / "pinned", log=lambda _: None)
    here, pinned = engine.read_records(tmp_path / "here"), engine.read_records(tmp_path / "pinned")  # NaN is NaN
    assert sorted(r["devices"] for r in pinned.values()) == ["0", "1"]
    for trial in spec.trials:
        assert pinned[trial.id]["status"] == here[trial.id]["status"] == "ok", pinned[trial.id].get("error")
        assert pinned[trial.id]["metrics"] == here[trial.id]["metrics"]


def test_the_example_specs_parse():
    from pathlib import Path

    from unlearn_app.sweep.spec import load_spec

    examples = Path(__file__).resolve().parents[2] / "examples" / "sweep"
    stages = load_spec(examples / "tiny-stages.yaml")
    assert len(stages.trials) == 2 * 2 * 2 * 2 and {t.stage for t in stages.trials} == {1, 2}
    assert stages.attacks["relearn"]["steps"] == 5
    klom = load_spec(examples / "tiny-klom.yaml")
    assert sum(t.oracle for t in klom.trials) == 4 and len(klom.trials) == 2 * 4 + 4


def test_ray_runs_sequential_stages_in_waves(tmp_path, monkeypatch):
    pytest.importorskip("ray")
    import unlearn_app.sweep.ray_engine as ray_engine
    from unlearn_app.sweep.engine import read_records

    spec = parse_spec(_sequential(), str(tmp_path / "s.yaml"))  # 4 chains of 2 stages
    failing = spec.trials[0].id  # the first chain's stage 1 fails
    batches = []

    def fake_run_ray(tasks, resources, on_record, address=None, trial_fn=None):
        batches.append([t.id for t, _ in tasks])
        for trial, args in tasks:
            assert args[1]["model"] == ("m" if trial.stage == 1 else
                                        str((tmp_path / "out" / "trials" / trial.after / "model").resolve()))
            on_record({**trial.as_dict(), "status": "failed" if trial.id == failing else "ok", "engine": "ray"})

    monkeypatch.setattr(ray_engine, "run_ray", fake_run_ray)
    run_sweep(spec, tmp_path / "out", engine="ray", log=lambda _: None)
    first, second = [t.id for t in spec.trials if t.stage == 1], [t.id for t in spec.trials if t.stage == 2]
    assert batches == [first, second[1:]]  # stage 2 once every stage 1 ended; the failed chain's stage 2 not sent
    blocked = read_records(tmp_path / "out")[second[0]]
    assert blocked["status"] == "failed" and "did not finish ok" in blocked["error"] and blocked["engine"] == "ray"
