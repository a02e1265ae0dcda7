"""Bad input to the open-unlearning (OU) reader, `unlearn report`, `unlearn ci`, `export-ou` and `unlearn run`: no
wrong verdict, no number from nowhere, no lost folder. Each test failed before its fix (a pass where a check fails,
OU's stored aggregate shown as if recomputed, a stale or deleted file, a traceback) and passes after."""

from __future__ import annotations

import copy
import json
import math
import os
import shutil

import pytest

from fixtures.commands import run_unlearn_here
from fixtures.open_unlearning import FQ_SEPARATED, reference_logs, tofu_logs, write_ou
from fixtures.runs import write_results
from unlearn_app.cli import main
from unlearn_app.open_unlearning.reader import OuFolderError, read_ou_folder


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err


def _suite(tmp_path, checks: list[str], tasks=("tofu_forget01",), **extra) -> str:
    suite = tmp_path / "suite.yaml"
    lines = [f"tasks: [{', '.join(tasks)}]", *(f"{k}: {v}" for k, v in extra.items()), "checks:",
             *(f"  - {c}" for c in checks)]
    suite.write_text("\n".join(lines) + "\n")
    return str(suite)


def _ci(tmp_path, suite, run, out="ci") -> tuple[int, dict]:
    code = main(["ci", "--suite", suite, "--from-results", str(run), "--out", str(tmp_path / out)])
    results = tmp_path / out / "results.json"
    return code, (json.loads(results.read_text()) if results.is_file() else {})


# --------------------------------------------------------------------------- the reference of an OU run
def test_an_ou_run_is_never_its_own_reference_not_even_as_a_copy(tmp_path, capsys):
    ou = write_ou(tmp_path / "tofu_forget01_npo", tofu_logs())
    copied = tmp_path / "copy" / "tofu_forget01_npo"
    shutil.copytree(ou, copied)
    for ref in (ou, copied, ou / "TOFU_EVAL.json"):
        with pytest.raises(OuFolderError, match="its own reference"):
            read_ou_folder(ou, str(ref))
        assert main(["report", str(ou), "--reference", str(ref)]) == 2
        assert "its own reference" in _one_line_error(capsys)
    code, record = _ci(tmp_path, _suite(tmp_path, ["tofu_forget01/forget_quality >= 0.05"], reference=str(ou)), ou)
    assert code == 2 and "its own reference" in record["error"]


def test_a_reference_that_holds_nothing_to_recompute_from_is_refused(tmp_path, capsys):
    ou = write_ou(tmp_path / "tofu_forget01_npo", tofu_logs())
    empty = tmp_path / "tofu_forget01_retain"
    empty.mkdir()
    (empty / "TOFU_EVAL.json").write_text("{}")
    assert main(["report", str(ou), "--reference", str(empty)]) == 2
    err = _one_line_error(capsys)
    assert str(empty / "TOFU_EVAL.json") in err and "forget_truth_ratio" in err
    suite = _suite(tmp_path, ["tofu_forget01/forget_quality >= 0.01"], reference=str(empty))
    code, record = _ci(tmp_path, suite, ou)  # before: OU's stored 0.03 passed the gate
    assert code == 2 and "forget_truth_ratio" in record["error"]


def test_a_reference_that_does_not_exist_is_named(tmp_path, capsys):
    ou = write_ou(tmp_path / "tofu_forget01_npo", tofu_logs())
    missing = tmp_path / "no_such_retain_run"
    assert main(["report", str(ou), "--reference", str(missing)]) == 2
    err = _one_line_error(capsys)
    assert f"--reference {missing} does not exist" in err
    ours = write_results(tmp_path / "ours", {"tofu_forget01": {"forget_quality": 0.2}})
    assert main(["report", str(ours), "--reference", str(missing)]) == 2  # before: ignored without a word
    assert f"--reference {missing} does not exist" in _one_line_error(capsys)
    code, record = _ci(tmp_path, _suite(tmp_path, ["tofu_forget01/forget_quality >= 0.05"], reference=str(missing)), ou)
    assert code == 2 and f"the reference {missing} does not exist" in record["error"]


# --------------------------------------------------------------------------- unusable per-item values
def _broken(change) -> dict:
    logs = copy.deepcopy(tofu_logs())
    change(logs)
    return logs


def _item(key, index, field, value):
    def change(logs):
        logs[key]["value_by_index"][str(index)][field] = value
    return change


BROKEN = {
    "NaN item": ("forget_Q_A_Prob", "forget_prob", _item("forget_Q_A_Prob", 2, "prob", float("nan")), "NaN"),
    "prob out of range": ("forget_Q_A_Prob", "forget_prob", _item("forget_Q_A_Prob", 1, "prob", 7.5), "7.5"),
    "empty per-item values": ("forget_Q_A_Prob", "forget_prob",
                              lambda logs: logs["forget_Q_A_Prob"].update(value_by_index={}), "no items"),
    "per-item values as a list": ("forget_Q_A_Prob", "forget_prob",
                                  lambda logs: logs["forget_Q_A_Prob"].update(value_by_index=[0.9, 0.8]), "a list"),
    "item without its value": ("forget_Q_A_Prob", "forget_prob",
                               lambda logs: logs["forget_Q_A_Prob"]["value_by_index"].update({"3": {}}), "'prob'"),
    "negative truth ratio": ("forget_truth_ratio", "forget_truth_ratio",
                             _item("forget_truth_ratio", 0, "score", -0.5), "-0.5"),
    "MIA without holdout": ("mia_min_k", "mia_min_k_auc", lambda logs: logs["mia_min_k"].pop("holdout"), "holdout"),
    "ROUGE as a string": ("forget_Q_A_ROUGE", "forget_rougeL_recall",
                          _item("forget_Q_A_ROUGE", 0, "rougeL_recall", "high"), "'high'"),
}


@pytest.mark.parametrize("case", list(BROKEN), ids=list(BROKEN))
def test_unusable_per_item_values_give_no_number_and_fail_the_gate(case, tmp_path, capsys):
    """Before: OU's stored agg_value was shown and checked as if recomputed (the gate passed)."""
    key, metric, change, why = BROKEN[case]
    ou = write_ou(tmp_path / "tofu_forget01_x", _broken(change))
    [task] = read_ou_folder(ou)
    assert math.isnan(task.metrics[metric])
    assert why in task.invalid[metric] and key in task.invalid[metric]
    data_file = tmp_path / "r.json"
    assert main(["report", str(ou), "--json", str(data_file)]) == 0
    printed = capsys.readouterr()
    assert json.loads(data_file.read_text())["tofu_forget01_x"]["tofu_forget01"][metric] is None
    assert f"{metric}: not recomputed" in printed.err and why in printed.err
    stored = tofu_logs()[key].get("agg_value")
    code, record = _ci(tmp_path, _suite(tmp_path, [f"tofu_forget01/{metric} >= -1000"]), ou)
    assert code == 1, record  # the bound is met by OU's stored value; the check fails all the same
    [check] = record["checks"]
    assert check["passed"] is False and check["value"] is None and why in check["message"], (stored, check)


def test_a_value_with_no_per_item_values_is_shown_marked_as_not_recomputed(tmp_path, capsys):
    logs = tofu_logs()
    logs["forget_Q_A_Prob"].pop("value_by_index")  # OU's aggregate alone
    ou = write_ou(tmp_path / "tofu_forget01_x", logs)
    [task] = read_ou_folder(ou)
    assert task.metrics["forget_prob"] == 0.75 and "forget_prob" in task.not_recomputed
    assert "forget_quality" in task.not_recomputed  # no reference: OU's own Forget Quality, marked
    assert main(["report", str(ou)]) == 0
    out = capsys.readouterr().out
    assert "forget_prob: not recomputed" in out and "open-unlearning's stored value" in out
    code, record = _ci(tmp_path, _suite(tmp_path, ["tofu_forget01/forget_prob >= 0.5"]), ou)
    assert code == 0 and "not recomputed" in record["checks"][0]["message"]
    assert record["checks"][0]["not_recomputed"] == ["tofu_forget01/forget_prob"]


def test_a_deeply_nested_ou_file_is_a_one_line_error(tmp_path, capsys):
    ou = tmp_path / "tofu_forget01_deep"
    ou.mkdir()
    (ou / "TOFU_EVAL.json").write_text("[" * 100_000 + "]" * 100_000)
    assert main(["report", str(ou)]) == 2
    assert str(ou / "TOFU_EVAL.json") in _one_line_error(capsys)
    code, record = _ci(tmp_path, _suite(tmp_path, ["tofu_forget01/forget_prob >= 0.5"]), ou)
    assert code == 2 and str(ou / "TOFU_EVAL.json") in record["error"]


# --------------------------------------------------------------------------- values of --from-results
@pytest.mark.parametrize("stored,why", [
    ("true", "true"), ("Infinity", "infinite"), ("-Infinity", "infinite"), ('"0.5"', "string"), ("null", "null"),
    ("[0.5]", "list"), ("NaN", "NaN"),
])
def test_only_finite_numbers_are_metric_values(stored, why, tmp_path):
    """Before: ``true`` read as 1.0 and ``Infinity`` passed (recorded as value null, passed true)."""
    path = write_results(tmp_path / "run", {"tofu_forget01": {"forget_quality": 0.5, "model_utility": 0.5}})
    path.write_text(path.read_text().replace('"forget_quality,none": 0.5', f'"forget_quality,none": {stored}'))
    suite = _suite(tmp_path, ["tofu_forget01/forget_quality >= 0.05", "tofu_forget01/model_utility >= 0.1"])
    code, record = _ci(tmp_path, suite, tmp_path / "run")
    assert code == 1, record
    first, second = record["checks"]
    assert first["passed"] is False and first["value"] is None and why in first["message"], first
    assert str(path) in first["message"] or why == "NaN"
    assert second["passed"] is True


def test_results_files_that_cannot_be_read_are_named(tmp_path, capsys):
    path = write_results(tmp_path / "run", {"tofu_forget01": {"forget_quality": 0.5}})
    suite = _suite(tmp_path, ["tofu_forget01/forget_quality >= 0.05"])
    path.write_text(path.read_text()[:40])  # truncated
    code, record = _ci(tmp_path, suite, tmp_path / "run")
    assert code == 2 and str(path) in record["error"] and "not valid JSON" in record["error"]
    path.write_text('{"results": {}}')
    code, record = _ci(tmp_path, suite, tmp_path / "run", out="ci2")
    assert code == 2 and str(path) in record["error"] and "holds no results" in record["error"], record
    capsys.readouterr()
    assert main(["report", str(tmp_path / "run")]) == 2  # before: an empty table, exit 0
    assert str(path) in (err := _one_line_error(capsys)) and "holds no results" in err


def test_an_internal_error_in_ci_is_exit_2_never_1(tmp_path, monkeypatch, capsys):
    from unlearn_app.ci import runner

    def boom(*args, **kwargs):
        raise RecursionError("deep")

    monkeypatch.setattr(runner, "copy_results", boom)
    (tmp_path / "run").mkdir()
    code, record = _ci(tmp_path, _suite(tmp_path, ["tofu_forget01/forget_quality >= 0.05"]), tmp_path / "run")
    assert code == 2 and "internal error" in record["error"]


# --------------------------------------------------------------------------- a folder holding two kinds of run
def test_a_folder_holding_an_ou_run_and_our_results_shows_both_or_is_refused(tmp_path, capsys):
    both = write_ou(tmp_path / "tofu_forget01_both", tofu_logs())
    write_results(both, {"tofu_forget01": {"forget_quality": 0.9, "model_utility": 0.1}})
    data_file = tmp_path / "r.json"
    assert main(["report", str(both), "--json", str(data_file)]) == 0
    data = json.loads(data_file.read_text())
    assert len(data) == 2, data  # before: the OU run alone
    values = sorted(r["tofu_forget01"]["model_utility"] for r in data.values())
    assert values == pytest.approx([0.1, 0.45])
    capsys.readouterr()
    code, record = _ci(tmp_path, _suite(tmp_path, ["tofu_forget01/model_utility >= 0.4"]), both)
    assert code == 2 and "both" in record["error"] and "results_" in record["error"], record


# --------------------------------------------------------------------------- export-ou
def test_export_ou_overwrite_replaces_the_folder_as_a_whole(tmp_path, capsys):
    run = write_results(tmp_path / "run", {"tofu_forget01": {"forget_quality": 0.5, "model_utility": 0.4}})
    out = tmp_path / "ou"
    out.mkdir()
    (out / "MUSE_EVAL.json").write_text("{}")  # a stale run of another benchmark
    (out / "notes.txt").write_text("stale")
    assert main(["export-ou", str(run), "--out", str(out), "--overwrite"]) == 0
    assert sorted(os.listdir(out)) == ["TOFU_EVAL.json", "TOFU_SUMMARY.json"]
    assert sorted(os.listdir(tmp_path)) == ["ou", "run"]  # nothing left beside it


def test_export_ou_given_an_ou_folder_says_what_to_give(tmp_path, capsys):
    ou = write_ou(tmp_path / "tofu_forget01_npo", tofu_logs())
    assert main(["export-ou", str(ou), "--out", str(tmp_path / "out")]) == 2
    err = _one_line_error(capsys)
    assert "already an open-unlearning" in err and "results_*.json" in err


# --------------------------------------------------------------------------- derived outputs inside their input
def test_outputs_written_inside_their_scanned_input_are_refused(tmp_path, capsys):
    run = write_results(tmp_path / "run", {"tofu_forget01": {"forget_quality": 0.5}}).parent.parent
    before = sorted(p.name for p in run.rglob("*"))
    suite = _suite(tmp_path, ["tofu_forget01/forget_quality >= 0.05"])
    assert main(["ci", "--suite", suite, "--from-results", str(run), "--out", str(run / "ci")]) == 2
    assert "--out" in _one_line_error(capsys)
    assert main(["export-ou", str(run), "--out", str(run / "ou")]) == 2
    assert "--out" in _one_line_error(capsys)
    assert sorted(p.name for p in run.rglob("*")) == before


# --------------------------------------------------------------------------- the working folder, its parents, home
def test_the_working_folder_its_parents_and_home_are_never_outputs(tmp_path, monkeypatch, capsys):
    work = tmp_path / "home" / "me" / "work"
    work.mkdir(parents=True)
    (work / "precious.txt").write_text("mine")
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path / "home" / "me"))
    run = write_results(tmp_path / "run", {"tofu_forget01": {"forget_quality": 0.5}})
    for out in (".", "..", str(work), "~", str(tmp_path)):
        for extra in ([], ["--overwrite"]):
            assert main(["run", "--model", str(tmp_path / "run"), "--out", out, *extra]) == 2
            err = _one_line_error(capsys)
            assert "--out" in err and ("working folder" in err or "home folder" in err), err
            assert main(["export-ou", str(run), "--out", out, *extra]) == 2
            _one_line_error(capsys)
    assert (work / "precious.txt").read_text() == "mine"


# --------------------------------------------------------------------------- unlearn run options
def test_run_options_that_cannot_apply_are_refused(tmp_path, capsys):
    from unlearn_methods.config import load_run_config

    with pytest.raises(ValueError, match="--epochs must be"):
        load_run_config(model="m", out="o", epochs=1e300)
    with pytest.raises(SystemExit):
        main(["run", "--model", "m", "--out", str(tmp_path / "o"), "--epochs", "1e300"])
    assert "--epochs" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--target .*--data rwku"):
        load_run_config(model="m", out="o", data="tofu", rwku_target=["1"])
    with pytest.raises(ValueError, match="--evaldu-target .*--data evaldu"):
        load_run_config(model="m", out="o", data="tofu", evaldu_target=3)
    assert main(["run", "--model", "m", "--out", str(tmp_path / "o"), "--target", "Stephen King"]) == 2
    assert "--target" in _one_line_error(capsys)


def test_a_forget_quality_check_with_a_good_reference_still_passes(tmp_path):
    """The fixes above leave the ordinary case alone: recomputed values are checked as before."""
    ou = write_ou(tmp_path / "tofu_forget01_npo", tofu_logs())
    ref = write_ou(tmp_path / "tofu_forget01_retain", reference_logs())
    code, record = _ci(tmp_path, _suite(tmp_path, ["tofu_forget01/forget_quality >= 0.02"], reference=str(ref)), ou)
    assert code == 0 and record["checks"][0]["value"] == pytest.approx(FQ_SEPARATED)
    assert "not_recomputed" not in record["checks"][0]


def test_report_of_a_missing_run_is_one_line(tmp_path, capsys):
    proc = run_unlearn_here(["report", str(tmp_path / "nothing")], capsys)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- RWKU targets
def test_rwku_targets_given_by_position_are_saved_by_name(tmp_path):
    from fixtures.rwku import TARGETS, write_rwku_corpus
    from unlearn_methods.config import load_run_config

    data = write_rwku_corpus(tmp_path / "rwku", "hub")
    cfg = load_run_config(None, model="m", out=str(tmp_path / "o"), data="rwku", data_dir=str(data),
                          rwku_target=["1", "2-3"])
    cfg.source.resolve_splits(cfg)
    assert cfg.rwku_target == TARGETS  # before: ["1", "2-3"], never the names
    assert cfg.source.eval_metadata(cfg) == {"rwku_targets": TARGETS}


def test_a_requested_rwku_target_without_probes_in_a_set_is_an_error(tmp_path):
    from fixtures.rwku import TARGETS, write_rwku_corpus
    from unlearn_tasks.dataset_loader import DataError
    from unlearn_tasks.rwku.data import build_docs
    from unlearn_tasks.rwku.options import RwkuOptions

    data = write_rwku_corpus(tmp_path / "rwku", "hub")
    level2 = data / "All" / "forget_level2.json"
    level2.write_text(json.dumps([r for r in json.loads(level2.read_text()) if r["subject"] != TARGETS[1]]))
    assert len(build_docs(RwkuOptions(rwku_set="forget_level1", data_dir=str(data), rwku_targets=TARGETS))) > 0
    with pytest.raises(DataError, match=f"forget_level2.*{TARGETS[1]}"):  # before: left out of the set's mean
        build_docs(RwkuOptions(rwku_set="forget_level2", data_dir=str(data), rwku_targets=TARGETS))


def test_any_error_outside_the_checks_is_exit_2_in_unlearn_ci(tmp_path, monkeypatch, capsys):
    """Exit 1 means "a check failed"; before, an exception raised before the checks ran was a traceback (exit 1)."""
    from unlearn_app.ci import runner

    def boom(opts):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(runner, "run_ci", boom)
    suite = _suite(tmp_path, ["tofu_forget01/forget_quality >= 0.05"])
    (tmp_path / "run").mkdir()
    assert main(["ci", "--suite", suite, "--from-results", str(tmp_path / "run"), "--out", str(tmp_path / "ci")]) == 2
    assert "internal error (RecursionError" in _one_line_error(capsys)
