"""`unlearn sweep` under bad input and interruptions: Ctrl-C anywhere, a crash mid-record, two sweeps on one folder,
folders that are not this sweep, a changed spec on --resume, seeds without a value, failed trials, spec limits and
broken files. No model is trained: trials are hand-written (``FakeTrial``) and record the numbers they are given."""

from __future__ import annotations

import json
import math
import signal
from pathlib import Path

import pytest
import yaml
from test_sweep import TASK, _spec_text

from fixtures.runs import write_results
from unlearn_app.sweep.engine import SweepError, append_record, read_records, run_sweep
from unlearn_app.sweep.leaderboard import write_leaderboard
from unlearn_app.sweep.spec import SpecError, parse_spec

ONE = {"graddiff": {}}  # one setting: seeds x 1 trials
NO_EVALUATION = {"evaluation": None, "select": None, "select_if": None, "pareto": None}  # nothing checked up front


class FakeTrial:
    """A trial body that trains nothing: writes a results file with ``forget`` (by seed) and returns the record
    `run_trial` would. ``hook(trial_id)`` runs first (to interrupt, say)."""

    def __init__(self, forget=None, hook=None):
        self.forget, self.hook, self.calls = forget or {}, hook, []

    def __call__(self, trial, config, checks, baseline, folder, threads=1, attacks=None, on_row=None):
        from unlearn_app.sweep.trial import check_results

        self.calls.append(trial["id"])
        if self.hook:
            self.hook(trial["id"])
        value = self.forget.get(trial["seed"], 0.25)
        metrics = {TASK: {"forget_prob": value, "retain_prob": 0.5}}
        path = write_results(Path(folder) / "model" / "eval", metrics)
        outcomes = check_results(checks, metrics, baseline)
        return {**trial, "status": "ok", "metrics": metrics, "checks": outcomes,
                "passed": all(c["passed"] for c in outcomes), "wall_s": 0.1,
                "results_file": str(path.relative_to(Path(folder).parent.parent))}


def _spec(tmp_path, **over):
    over.setdefault("methods", ONE)
    text = _spec_text(**over)
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return parse_spec(text, str(path))


def _quiet(_):
    pass


# --------------------------------------------------------------------------- Ctrl-C (item: stop, exit 130, rerun)
def test_ctrl_c_caught_inside_a_trial_stops_the_sweep_and_resume_reruns_it(tmp_path):
    spec = _spec(tmp_path, seeds=[0, 1, 2])
    ids = [t.id for t in spec.trials]

    def swallow(trial_id):  # a library that turns Ctrl-C into an error of the trial (recorded as failed before)
        if trial_id == ids[1]:
            try:
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:
                raise RuntimeError("interrupted inside the library") from None

    first = FakeTrial(hook=swallow)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, tmp_path / "out", trial_fn=lambda *a, **k: _as_failed_on_error(first, *a, **k), log=_quiet)
    assert list(read_records(tmp_path / "out")) == ids[:1]  # the interrupted trial has no record, the third never ran
    again = FakeTrial()
    run_sweep(spec, tmp_path / "out", resume=True, trial_fn=again, log=_quiet)
    assert again.calls == ids[1:]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the handler is put back


def _as_failed_on_error(trial_fn, *args, **kw):
    """What run_trial does with an exception inside the trial: a failed record."""
    try:
        return trial_fn(*args, **kw)
    except Exception as e:  # noqa: BLE001
        return {**args[0], "status": "failed", "error": f"{type(e).__name__}: {e}", "wall_s": 0.0}


def test_ctrl_c_during_a_finaliser_still_stops_the_sweep(tmp_path, capsys):
    spec = _spec(tmp_path, seeds=[0, 1, 2])
    ids = [t.id for t in spec.trials]

    class Finalised:
        def __del__(self):
            signal.raise_signal(signal.SIGINT)  # Python prints "Exception ignored in ... __del__" and goes on

    def in_finaliser(trial_id):
        if trial_id == ids[0]:
            Finalised()

    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, tmp_path / "out", trial_fn=FakeTrial(hook=in_finaliser), log=_quiet)
    assert read_records(tmp_path / "out") == {}  # the trial under Ctrl-C is not recorded: --resume reruns it


def test_cli_ctrl_c_exits_130(tmp_path, monkeypatch, capsys):
    from unlearn_app.cli import main

    spec = _spec(tmp_path, seeds=[0, 1], **NO_EVALUATION)
    first = spec.trials[0].id

    def interrupt(trial_id):
        if trial_id == first:
            try:
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:
                pass  # swallowed by the trial: the sweep must stop all the same

    monkeypatch.setattr("unlearn_app.sweep.engine.run_trial", FakeTrial(hook=interrupt))
    assert main(["sweep", spec.path, "--out", str(tmp_path / "out")]) == 130
    assert "interrupted" in capsys.readouterr().out and read_records(tmp_path / "out") == {}


# --------------------------------------------------------------------------- trials.jsonl
def test_a_half_written_last_line_is_not_joined_by_the_next_record(tmp_path):
    spec = _spec(tmp_path, seeds=[0, 1])
    out = tmp_path / "out"
    run_sweep(spec, out, trial_fn=FakeTrial(), log=_quiet)
    path = out / "trials.jsonl"
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + lines[1][:40])  # a crash while the second record was written
    assert list(read_records(out)) == [spec.trials[0].id]
    again = FakeTrial()
    run_sweep(spec, out, resume=True, trial_fn=again, log=_quiet)
    assert again.calls == [spec.trials[1].id]
    assert list(read_records(out)) == [t.id for t in spec.trials]  # the resumed trial counts
    assert all(json.loads(line) for line in path.read_text().splitlines())  # every line a record


@pytest.mark.parametrize("content, message", [
    (b'[1, 2]\n', "line 1: not a trial record"),
    (b'{"status": "ok"}\n', "line 1: not a trial record"),
    (b'{"id": "x"}\n', "line 1: not a trial record"),
    (b'{"id": "x", "status": "ok"}\n\xff\xfe\n{"id": "y", "status": "ok"}\n', "line 2: not UTF-8"),
    (b'{"id": "x", "status": "ok"}\n{"id": \n{"id": "y", "status": "ok"}\n', "line 2: not JSON"),
], ids=["list", "no id", "no status", "0xff", "broken middle line"])
def test_a_broken_trials_file_is_one_line_naming_the_line(tmp_path, content, message):
    (tmp_path / "trials.jsonl").write_bytes(content)
    with pytest.raises(SweepError, match=message) as e:
        read_records(tmp_path)
    assert "trials.jsonl" in str(e.value) and "\n" not in str(e.value)


# --------------------------------------------------------------------------- two sweeps on one folder
def test_a_second_sweep_on_the_same_folder_is_refused(tmp_path):
    spec = _spec(tmp_path, seeds=[0])
    out = tmp_path / "out"
    seen = []  # a second `unlearn sweep --resume` (another process) starts while the first one runs a trial
    import multiprocessing

    run_sweep(spec, out, trial_fn=FakeTrial(hook=lambda i: _in_other_process(multiprocessing, spec, out, seen)),
              log=_quiet)
    assert seen == ["refused"]
    assert len((out / "trials.jsonl").read_text().splitlines()) == 1


def _other(spec_path, out, queue):
    from unlearn_app.sweep.spec import load_spec

    try:
        run_sweep(load_spec(spec_path), out, resume=True, trial_fn=FakeTrial(), log=_quiet)
        queue.put("ran")
    except SweepError as e:
        queue.put("refused" if "is in use by another unlearn sweep" in str(e) else str(e))


def _in_other_process(multiprocessing, spec, out, seen):
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    proc = context.Process(target=_other, args=(spec.path, str(out), queue))
    proc.start()
    seen.append(queue.get(timeout=120))
    proc.join()


# --------------------------------------------------------------------------- folders that are not this sweep
def test_resume_into_a_folder_that_is_not_a_sweep_writes_nothing(tmp_path):
    spec = _spec(tmp_path)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "spec.yaml").write_text("mine")
    with pytest.raises(SweepError, match="is not a sweep folder"):
        run_sweep(spec, model, resume=True, trial_fn=FakeTrial(), log=_quiet)
    assert sorted(p.name for p in model.iterdir()) == ["config.json", "spec.yaml"]
    assert (model / "spec.yaml").read_text() == "mine"


def test_resume_into_another_sweep_writes_nothing(tmp_path):
    other = _spec(tmp_path, seeds=[5, 6])
    out = tmp_path / "out"
    run_sweep(other, out, trial_fn=FakeTrial(), log=_quiet)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    spec = _spec(tmp_path, seeds=[0])
    with pytest.raises(SweepError, match="holds another sweep"):
        run_sweep(spec, out, resume=True, trial_fn=FakeTrial(), log=_quiet)
    with pytest.raises(SweepError, match="holds another sweep"):
        write_leaderboard(spec, out)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before


@pytest.mark.parametrize("kind", ["missing", "empty", "model folder"])
def test_leaderboard_only_on_a_folder_without_a_sweep(tmp_path, kind, capsys):
    from unlearn_app.cli import main

    spec = _spec(tmp_path)
    out = tmp_path / "out"
    if kind != "missing":
        out.mkdir()
    if kind == "model folder":
        (out / "config.json").write_text("{}")
    before = sorted(out.rglob("*")) if out.exists() else None
    assert main(["sweep", spec.path, "--out", str(out), "--leaderboard-only"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "no sweep" in err
    assert (sorted(out.rglob("*")) if out.exists() else None) == before


def test_leaderboard_after_trial_folders_were_removed_writes_nothing(tmp_path):
    import shutil

    spec = _spec(tmp_path, seeds=[0, 1])
    out = tmp_path / "out"
    run_sweep(spec, out, trial_fn=FakeTrial(), log=_quiet)
    write_leaderboard(spec, out)
    before = {p.name: p.read_bytes() for p in out.glob("leaderboard.*")}
    shutil.rmtree(out / "trials" / spec.trials[1].id)
    with pytest.raises(SweepError, match=f"results file of trial {spec.trials[1].id} .* is missing"):
        write_leaderboard(spec, out)
    assert {p.name: p.read_bytes() for p in out.glob("leaderboard.*")} == before
    assert not [p for p in out.iterdir() if p.name.startswith(".")] or all(
        p.name == ".sweep.lock" for p in out.iterdir() if p.name.startswith("."))


# --------------------------------------------------------------------------- a changed spec on --resume
def test_resume_with_changed_checks_recomputes_the_verdicts(tmp_path):
    out = tmp_path / "out"
    loose = _spec(tmp_path, seeds=[0, 1])
    run_sweep(loose, out, trial_fn=FakeTrial(), log=_quiet)
    write_leaderboard(loose, out)
    assert json.loads((out / "leaderboard.json").read_text())["leaderboard"][0]["checks_passed"] is True
    strict = _spec(tmp_path, seeds=[0, 1], evaluation={"tasks": [TASK], "limit": 4, "metadata": {"data_dir": "d"},
                                                        "checks": [f"{TASK}/forget_prob <= 0.1"]})
    assert [t.id for t in strict.trials] == [t.id for t in loose.trials]  # the same trials: nothing reruns
    again = FakeTrial()
    run_sweep(strict, out, resume=True, trial_fn=again, log=_quiet)
    assert again.calls == []
    write_leaderboard(strict, out)
    board = json.loads((out / "leaderboard.json").read_text())
    assert board["leaderboard"][0]["checks_passed"] is False  # 0.25 <= 0.1 fails under the current spec
    assert [c["check"] for r in board["trials"] for c in r["checks"]] == [f"{TASK}/forget_prob <= 0.1"] * 2
    assert all(r["passed"] is False for r in board["trials"])
    assert "FAIL" in (out / "leaderboard.md").read_text()


# --------------------------------------------------------------------------- a seed without a value
@pytest.mark.parametrize("missing", [None, math.nan])
def test_a_seed_without_a_value_is_flagged_not_hidden(tmp_path, missing):
    spec = _spec(tmp_path, seeds=[0, 1])
    out = tmp_path / "out"
    run_sweep(spec, out, trial_fn=FakeTrial(forget={0: 0.3, 1: missing}), log=_quiet)
    write_leaderboard(spec, out)
    board = json.loads((out / "leaderboard.json").read_text())
    (row,) = board["leaderboard"]
    assert row["score"]["mean"] == 0.3 and row["score"]["n"] == 1 and row["score"]["sd"] is None
    assert row["score"]["missing_seeds"] == [1]
    md = (out / "leaderboard.md").read_text()
    assert "0.3000 (n=1 of 2; no value: seed 1)" in md
    assert "0.3 ± 0" not in md


# --------------------------------------------------------------------------- exit status
def test_a_sweep_with_a_failed_trial_exits_1_and_says_so_last(tmp_path, monkeypatch, capsys):
    from unlearn_app.cli import main

    spec = _spec(tmp_path, seeds=[0, 1], **NO_EVALUATION)

    def fail_all(trial, *args, **kw):
        return {**trial, "status": "failed", "error": "RuntimeError: boom", "wall_s": 0.0}

    monkeypatch.setattr("unlearn_app.sweep.engine.run_trial", fail_all)
    assert main(["sweep", spec.path, "--out", str(tmp_path / "out")]) == 1
    out = capsys.readouterr()
    last = (out.out + out.err).strip().splitlines()[-1]
    assert "2 of 2 trials failed" in last and "--resume --retry-failed" in last


# --------------------------------------------------------------------------- limits and ranges of the spec
@pytest.mark.parametrize("over, message", [
    ({"methods": {"graddiff": {"grid": {"lr": [1e-5 * (i + 1) for i in range(1000)],
                                        "epochs": list(range(1, 1001))}}}}, "1000000 settings"),
    ({"methods": {"graddiff": {"random": {"trials": 100000000, "space": {"lr": [1e-5, 1e-4]}}}}}, "100000000"),
    ({"resources": {"cpus": 100000}}, "resources.cpus"),
    ({"resources": {"gpus": float("nan")}}, "resources.gpus"),
    ({"resources": {"gpus": float("inf")}}, "resources.gpus"),
])
def test_spec_counts_and_resources_are_capped(over, message):
    import time

    start = time.monotonic()
    with pytest.raises(SpecError, match=message):
        parse_spec(_spec_text(**over))
    assert time.monotonic() - start < 30


# --------------------------------------------------------------------------- checked before the first trial
@pytest.mark.parametrize("over, message", [
    ({"evaluation": {"tasks": [TASK], "metadata": {"data_dri": "d"}}}, "unknown --metadata key"),
    ({"evaluation": {"tasks": [TASK], "baseline": "/nonexistent/base", "checks": [f"{TASK}/forget_prob <= baseline"]}},
     "baseline /nonexistent/base does not exist"),
    ({"evaluation": {"tasks": [TASK], "reference": "/nonexistent/ref"}}, "evaluation.reference: /nonexistent/ref does not exist"),
    ({"evaluation": {"tasks": [TASK], "baseline": "BASE", "checks": [f"{TASK}/forget_pbor <= baseline"]}},
     "has no metric 'forget_pbor'"),
    ({"select": f"{TASK}/forget_pbor:min", "select_if": [], "evaluation": {"tasks": [TASK], "baseline": "BASE"}},
     "has no metric 'forget_pbor'"),
    ({"pareto": {"utility": f"{TASK}/retain_pbor:max", "forget": f"{TASK}/forget_prob:min"},
      "evaluation": {"tasks": [TASK], "baseline": "BASE"}}, "has no metric 'retain_pbor'"),
    ({"evaluation": {"tasks": ["hellaswag"], "checks": ["hellaswag/accc >= 0.3"]}, "select": None, "select_if": None,
      "pareto": None}, "has no metric 'accc'"),
], ids=["metadata key", "baseline", "reference", "check metric", "select metric", "pareto metric", "lm-eval task"])
def test_spec_is_checked_before_the_first_trial(tmp_path, over, message):
    from unlearn_app.sweep.validate import validate_spec

    base = write_results(tmp_path / "base", {TASK: {"forget_prob": 0.5, "retain_prob": 0.5}}).parent
    over = json.loads(json.dumps(over).replace('"BASE"', json.dumps(str(base))))
    with pytest.raises(SpecError, match=message):
        validate_spec(parse_spec(_spec_text(methods=ONE, **over)))


def test_a_good_spec_passes_the_checks_before_the_first_trial(tmp_path):
    from unlearn_app.sweep.validate import validate_spec

    base = write_results(tmp_path / "base", {TASK: {"forget_prob": 0.5, "retain_prob": 0.5}}).parent
    validate_spec(parse_spec(_spec_text(methods=ONE, evaluation={
        "tasks": [TASK], "baseline": str(base), "metadata": {"data_dir": "d"},
        "checks": [f"{TASK}/forget_prob <= baseline"]})))


# --------------------------------------------------------------------------- the output guard
@pytest.mark.parametrize("where", ["model", "data_dir", "baseline"])
def test_sweep_out_inside_an_input_of_the_spec_is_refused(tmp_path, where, capsys):
    from unlearn_app.cli import main

    folders = {k: tmp_path / k for k in ("model", "data_dir", "baseline")}
    for f in folders.values():
        f.mkdir()
        (f / "keep.txt").write_text("x")
    write_results(folders["baseline"], {TASK: {"forget_prob": 0.5, "retain_prob": 0.5}})
    spec = tmp_path / "spec.yaml"
    spec.write_text(_spec_text(model=folders["model"], data_dir=folders["data_dir"], methods=ONE, evaluation={
        "tasks": [TASK], "baseline": str(folders["baseline"]), "checks": [f"{TASK}/forget_prob <= baseline"]}))
    before = sorted(tmp_path.rglob("*"))
    for extra in ([], ["--resume"]):
        assert main(["sweep", str(spec), "--out", str(folders[where] / "sweep"), *extra]) == 2
        err = capsys.readouterr().err
        assert "lies inside the input" in err and err.count("\n") == 1
    assert sorted(tmp_path.rglob("*")) == before


# --------------------------------------------------------------------------- unlearn ci --from-sweep
@pytest.mark.parametrize("content", [b'{"leaderboard": [', b"\xff", b"[]", b'{"leaderboard": [1]}'],
                         ids=["truncated", "0xff", "a list", "rows not objects"])
def test_ci_from_sweep_with_a_broken_leaderboard_is_exit_2(tmp_path, content, capsys):
    from unlearn_app.cli import main

    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "leaderboard.json").write_bytes(content)
    suite = tmp_path / "suite.yaml"
    suite.write_text(yaml.safe_dump({"tasks": [TASK], "checks": [f"{TASK}/forget_prob <= 1"]}))
    assert main(["ci", "--suite", str(suite), "--out", str(tmp_path / "ci"), "--from-sweep",
                 str(tmp_path / "sweep")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "leaderboard.json" in err and err.count("\n") == 1


def test_append_record_on_disk(tmp_path):
    append_record(tmp_path, {"id": "a", "status": "ok"})
    assert read_records(tmp_path) == {"a": {"id": "a", "status": "ok"}}


def test_a_metric_no_check_could_know_up_front_stops_the_sweep_after_its_first_trial(tmp_path):
    spec = _spec(tmp_path, seeds=[0, 1, 2], select=f"{TASK}/forget_pbor:min", select_if=[])
    out = tmp_path / "out"
    fake = FakeTrial()
    with pytest.raises(SpecError, match=f"select .*: {TASK} has no metric 'forget_pbor'; its metrics are "
                                        "forget_prob, retain_prob .*first trial"):
        run_sweep(spec, out, trial_fn=fake, log=_quiet)
    assert fake.calls == [spec.trials[0].id] and list(read_records(out)) == [spec.trials[0].id]  # kept for --resume
