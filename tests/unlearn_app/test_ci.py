"""`unlearn ci` without a model: the check grammar, suite validation, JUnit/Markdown outputs, --from-results,
exit codes, the cache key and the model-index card."""

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from fixtures.runs import provenance_record, write_results
from unlearn_app.ci.cache import ResultsCache, cache_key, model_revision
from unlearn_app.ci.checks import CheckSyntaxError, evaluate, lookup_in, parse_check
from unlearn_app.ci.suite import SuiteError, parse_suite, validate_checks
from unlearn_app.cli import main

RESULTS = {"tofu_forget10": {"forget_quality": 0.2, "model_utility": 0.6, "privleak": -3.0, "forget_prob": math.nan}}
BASELINE = {"tofu_forget10": {"forget_quality": 1e-5, "model_utility": 0.62, "privleak": -90.0}}


@pytest.mark.parametrize("text, value, bound, passed", [
    ("tofu_forget10/forget_quality >= 0.05", 0.2, 0.05, True),
    ("tofu_forget10/model_utility >= 0.95 * baseline", 0.6, 0.95 * 0.62, True),
    ("tofu_forget10/model_utility > baseline - 0.01", 0.6, 0.61, False),
    ("abs(tofu_forget10/privleak) <= 5", 3.0, 5.0, True),
    ("-tofu_forget10/privleak < (1 + 2) * 2 / 3", 3.0, 2.0, False),
    ("tofu_forget10/forget_quality / tofu_forget10/model_utility >= 1e-1", 0.2 / 0.6, 0.1, True),
    ("tofu_forget10/privleak != baseline", -3.0, -90.0, True),
])
def test_checks_compute_value_bound_and_verdict(text, value, bound, passed):
    outcome = evaluate(parse_check(text), lookup_in(RESULTS), lookup_in(BASELINE))
    assert outcome.value == pytest.approx(value) and outcome.bound == pytest.approx(bound)
    assert outcome.passed is passed
    assert text in outcome.message and ("FAIL" in outcome.message) is (not passed)


def test_a_nan_metric_fails_its_check_and_says_why():
    outcome = evaluate(parse_check("tofu_forget10/forget_prob <= 1"), lookup_in(RESULTS))
    assert not outcome.passed and "NaN" in outcome.message


@pytest.mark.parametrize("text, expected", [
    ("tofu_forget10/forget_quality >=", "ends too early"),
    ("tofu_forget10/forget_quality => 0.05", "column 30"),
    ("forget_quality >= 0.05", "unknown name 'forget_quality'"),
    ("tofu_forget10/model_utility >= __import__('os')", "unexpected character \"'\" at column 43"),
    ("tofu_forget10/model_utility >= __import__", "unknown name '__import__'"),
    ("tofu_forget10/model_utility >= 0.9; rm -rf /", "unexpected character ';'"),
    ("tofu_forget10/model_utility 0.9", "comparison"),
    ("a/b - c/d >= baseline", "exactly one TASK/METRIC"),
    ("1 >= 0", "names no TASK/METRIC"),
])
def test_bad_checks_are_refused_with_the_place_and_the_fix(text, expected):
    with pytest.raises(CheckSyntaxError, match=None) as e:
        parse_check(text)
    assert expected in str(e.value)


def test_suite_errors_name_the_line():
    text = "tasks: [tofu_forget10]\nchecks:\n  - tofu_forget10/forget_quality >= 0.05\n  - tofu_forget10/x >>= 1\n"
    with pytest.raises(SuiteError, match=r"s.yaml:4: checks: bad check"):
        parse_suite(text, "s.yaml")
    with pytest.raises(SuiteError, match=r":2: bakend: unknown key"):
        parse_suite("tasks: [t]\nbakend: hf\n", "s.yaml")
    with pytest.raises(SuiteError, match="tasks: missing"):
        parse_suite("checks: []\n", "s.yaml")
    suite = parse_suite("tasks: [tofu_forget10]\nchecks:\n  - tofu_forget10/forget_qualty >= 0.05\n"
                        "  - tofu_forget1/forget_quality >= 0.05\n", "s.yaml")
    metrics = {"tofu_forget10": ["forget_quality", "model_utility"]}
    with pytest.raises(SuiteError, match=r":3: .*has no metric 'forget_qualty'; its metrics are forget_quality"):
        validate_checks(suite, metrics)
    suite.checks = suite.checks[1:]
    with pytest.raises(SuiteError, match=r":4: .*unknown task 'tofu_forget1'"):
        validate_checks(suite, metrics)
    suite = parse_suite("tasks: [tofu_formats]\nchecks: [tofu_formats/forget_retain_gap <= 0]\n", "s.yaml")
    with pytest.raises(SuiteError, match="tofu_formats is a group; name one of its tasks: tofu_mcqa"):
        validate_checks(suite, {"tofu_mcqa": ["forget_retain_gap"]}, {"tofu_formats": ["tofu_mcqa"]})


def _suite(tmp_path, checks, baseline=None):
    lines = ["tasks: [tofu_forget10]", *([f"baseline: {baseline}"] if baseline else []), "checks:"]
    path = tmp_path / "suite.yaml"
    path.write_text("\n".join(lines + [f"  - {c}" for c in checks]) + "\n")
    return path


def test_from_results_pass_fail_and_error_exit_codes(tmp_path, monkeypatch, capsys):
    run = tmp_path / "run"
    write_results(run, RESULTS, {"tofu_forget10": provenance_record()})
    write_results(tmp_path / "base", BASELINE)
    step_summary = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    suite = _suite(tmp_path, ["tofu_forget10/forget_quality >= 0.05", "tofu_forget10/model_utility >= 0.95 * baseline"],
                   baseline=tmp_path / "base")
    out = tmp_path / "out"
    assert main(["ci", "--suite", str(suite), "--from-results", str(run), "--out", str(out)]) == 0
    record = json.loads((out / "results.json").read_text())
    assert record["passed"] is True and [c["passed"] for c in record["checks"]] == [True, True]
    assert record["checks"][1]["bound"] == pytest.approx(0.95 * 0.62)
    assert record["provenance"]["tasks"]["tofu_forget10"]["data_fingerprint"] == "a" * 64
    assert record["provenance"]["software"]["package"] == "lm-eval-unlearning"
    assert "all 2 checks passed" in step_summary.read_text()

    suite = _suite(tmp_path, ["tofu_forget10/forget_quality >= 0.05", "tofu_forget10/model_utility >= 0.99"])
    assert main(["ci", "--suite", str(suite), "--from-results", str(run), "--out", str(out),
                 "--overwrite"]) == 1
    printed = capsys.readouterr().out
    assert "FAIL tofu_forget10/model_utility >= 0.99: value 0.6 >= bound 0.99 is false" in printed
    summary = (out / "summary.md").read_text()
    assert "1 of 2 checks failed" in summary and "| ❌ FAIL | `tofu_forget10/model_utility >= 0.99` | 0.6000 | 0.9900 |" in summary
    junit = ET.parse(out / "junit.xml").getroot()
    assert junit.get("tests") == "2" and junit.get("failures") == "1"
    cases = junit.findall(".//testcase")
    assert [c.get("name") for c in cases] == ["tofu_forget10/forget_quality >= 0.05", "tofu_forget10/model_utility >= 0.99"]
    assert cases[0].find("failure") is None and "bound 0.99" in cases[1].find("failure").get("message")
    assert step_summary.read_text().count("## unlearn ci") == 2  # appended, not overwritten

    suite = _suite(tmp_path, ["tofu_forget10/model_utilty >= 0.5"])
    assert main(["ci", "--suite", str(suite), "--from-results", str(run), "--out", str(out),
                 "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert ":3: checks: " in err and "has no metric 'model_utilty'" in err
    assert ET.parse(out / "junit.xml").getroot().get("errors") == "1"
    suite = _suite(tmp_path, ["tofu_forget10/model_utility >= 0.5 * baseline"])
    assert main(["ci", "--suite", str(suite), "--from-results", str(run), "--out", str(out),
                 "--overwrite"]) == 2
    assert "no baseline run" in capsys.readouterr().err


def test_cache_key_follows_model_content_and_inputs(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights-1")
    first = model_revision(str(model))
    (model / "README.md").write_text("model card with results")  # --update-card must not invalidate the cache
    assert model_revision(str(model)) == first
    (model / "model.safetensors").write_bytes(b"weights-2")
    assert model_revision(str(model)) != first
    assert model_revision("me/model", "a" * 40) == "hub:me/model@" + "a" * 40
    inputs = {"model": first, "tasks": {"tofu_forget10": {"version": 1.0, "data_fingerprint": "x"}}}
    changed = {"model": first, "tasks": {"tofu_forget10": {"version": 1.0, "data_fingerprint": "y"}}}
    assert cache_key(inputs) == cache_key(json.loads(json.dumps(inputs))) != cache_key(changed)
    cache = ResultsCache(tmp_path / "cache")
    assert cache.get(cache_key(inputs)) is None
    source = tmp_path / "results_x.json"
    source.write_text('{"results": {}}')
    stored = cache.put(cache_key(inputs), source, inputs)
    assert cache.get(cache_key(inputs)) == stored and cache.get(cache_key(changed)) is None
    assert json.loads((stored.parent / "key.json").read_text())["tasks"]["tofu_forget10"]["data_fingerprint"] == "x"


def test_update_card_writes_model_index(tmp_path):
    from huggingface_hub import ModelCard

    from unlearn_app.checkpoint.model_card import update_card_eval_results

    model = tmp_path / "model"
    model.mkdir()
    (model / "README.md").write_text("---\nlicense: mit\n---\n\n# My model\n\nText kept.\n")
    raw = {"results": {"tofu_forget10": {"forget_quality,none": 0.2, "model_utility,none": 0.6,
                                         "privleak,none": math.nan}},
           "configs": {"tofu_forget10": {"provenance": provenance_record()}}}
    update_card_eval_results(str(model), raw, "my-model")
    update_card_eval_results(str(model), raw, "my-model")  # idempotent: replaces its own entries
    card = ModelCard.load(model / "README.md")
    results = {(r.task_name, r.metric_type): r.metric_value for r in card.data.eval_results}
    assert results == {("tofu_forget10 (lm-eval-unlearning)", "forget_quality"): 0.2,
                       ("tofu_forget10 (lm-eval-unlearning)", "model_utility"): 0.6}
    assert card.data.eval_results[0].dataset_type == "locuslab/TOFU"
    text = (model / "README.md").read_text()
    assert "model-index:" in text and "Text kept." in text and "license: mit" in text


def test_unlearn_push_writes_the_eval_results_as_model_index(tmp_path, monkeypatch, capsys):
    from huggingface_hub import ModelCard

    import unlearn_app.checkpoint.hub

    folder = tmp_path / "ckpt"
    write_results(folder / "eval", {"tofu_forget10": {"forget_quality": 0.3, "model_utility": 0.55}},
                  {"tofu_forget10": provenance_record()})
    (folder / "README.md").write_text("---\ntags:\n- unlearning\n---\n\n# ckpt\n")
    pushed = []
    monkeypatch.setattr(unlearn_app.checkpoint.hub, "push_folder", lambda f, repo, private: pushed.append(
        (repo, (Path(f) / "README.md").read_text())) or "https://hub/commit/1")
    assert main(["push", str(folder), "--repo", "me/ckpt"]) == 0
    card = ModelCard.load(folder / "README.md")
    assert {r.metric_type: r.metric_value for r in card.data.eval_results} == {"forget_quality": 0.3,
                                                                              "model_utility": 0.55}
    assert card.data.model_name == "ckpt" and "unlearning" in card.data.tags
    assert pushed[0][0] == "me/ckpt" and "model-index" in pushed[0][1]  # the card is updated before the upload


def test_unknown_task_in_the_suite_is_an_error_before_any_model_loads(tmp_path, capsys):
    suite = tmp_path / "suite.yaml"
    suite.write_text("tasks: [tofu_forget11]\nchecks: [tofu_forget11/forget_quality >= 0]\n")
    (tmp_path / "model").mkdir()
    assert main(["ci", "--suite", str(suite), "--model", str(tmp_path / "model"), "--out", str(tmp_path / "out")]) == 2
    assert "unknown task(s) ['tofu_forget11']" in capsys.readouterr().err


def test_a_bad_suite_or_option_is_exit_2_and_recorded_under_a_launcher(tmp_path, capsys, monkeypatch):
    """In one process: exit 2, one line, nothing written (the corrected command needs no --overwrite). Under a
    launcher, whose exit status is 1 for a failed check and an error alike, results.json and junit.xml record the
    error (the launch itself: test_multiprocess_commands)."""
    import json

    from unlearn_app.ci import runner

    suite = tmp_path / "suite.yaml"
    suite.write_text("tasks: [tofu_forget01_likelihood]\nchecks: 5\n")
    (tmp_path / "model").mkdir()
    bad_suite = ["ci", "--suite", str(suite), "--model", str(tmp_path / "model"), "--out"]
    bad_option = [*bad_suite[:-1], "--model-args", "{bad", "--out"]
    for args in (bad_suite, bad_option):
        assert main([*args, str(tmp_path / "one")]) == 2
        assert capsys.readouterr().err.count("\n") == 1 and not (tmp_path / "one").exists()
    monkeypatch.setattr(runner, "launched", lambda: True)  # this process as the main one of a launch
    for args, out, start in ((bad_suite, tmp_path / "suite", f"{suite}:2: checks"),
                             (bad_option, tmp_path / "option", "--model-args must be a JSON object")):
        assert main([*args, str(out)]) == 2
        record = json.loads((out / "results.json").read_text())
        assert capsys.readouterr().err.strip() == f"error: {record['error']}" and record["error"].startswith(start)
        assert "passed" not in record and "<error" in (out / "junit.xml").read_text()


def test_a_launched_run_reads_as_an_error_until_it_has_its_verdict(tmp_path, monkeypatch):
    """Under a launcher, a process that fails stops the others, the main one too, before it writes anything: so
    results.json says "error" from before the evaluation until the final record replaces it."""
    import json

    from unlearn_app.ci import runner

    seen = {}

    def killed_here(opts, suite, out):  # what a launch killed during the evaluation leaves behind
        seen.update(json.loads((out / "results.json").read_text()))
        raise SystemExit(1)

    monkeypatch.setattr(runner, "launched", lambda: True)
    monkeypatch.setattr(runner, "evaluate_model", killed_here)
    suite = tmp_path / "suite.yaml"
    suite.write_text("tasks: [tofu_forget01_likelihood]\nchecks: [tofu_forget01_likelihood/forget_prob >= 0]\n")
    (tmp_path / "model").mkdir()
    with pytest.raises(SystemExit):
        main(["ci", "--suite", str(suite), "--model", str(tmp_path / "model"), "--out", str(tmp_path / "out")])
    assert seen["error"] == runner.STOPPED and "passed" not in seen


def test_report_provenance_names_the_data_read():
    """A local file by its path (the demo corpus is not locuslab/TOFU, only in its schema); a Hub dataset by id,
    config and revision."""
    from unlearn_app.reports.evaluated_run import Run, provenance_rows

    local = provenance_record()
    hub = {**local, "data": [{"kind": "hub", "source": "locuslab/TOFU", "config": "forget10", "revision": "abc123"}]}
    rows = {name: dict((field, value) for _, field, value in provenance_rows(Run(name, "", {}, {"tofu_forget10": p})))
            for name, p in (("local", local), ("hub", hub))}
    assert rows["local"]["data"] == "/d/f.json (local file, locuslab/TOFU schema) sha256:aaaaaaaaaaaa"
    assert rows["hub"]["data"] == "locuslab/TOFU/forget10 rev:abc123"


def test_report_prints_provenance_and_warns_when_runs_differ(tmp_path, capsys):
    metrics = {"tofu_forget10": {"forget_quality": 0.2, "model_utility": 0.6}}
    write_results(tmp_path / "a", metrics, {"tofu_forget10": provenance_record()})
    write_results(tmp_path / "b", metrics, {"tofu_forget10": provenance_record()})
    write_results(tmp_path / "c", metrics, {"tofu_forget10": provenance_record(
        data_sha="c" * 64, modes={"answer_scoring": "tofu"}, version="0.2.0")})
    assert main(["report", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out, err = capsys.readouterr()
    assert "warning" not in err
    assert ("| a | tofu_forget10 | lm-eval-unlearning 0.1.0 (git n/a) | /d/f.json (local file, locuslab/TOFU schema) "
            "sha256:aaaaaaaaaaaa |") in out
    assert main(["report", str(tmp_path / "a"), str(tmp_path / "c"), "--out", str(tmp_path / "r.md")]) == 0
    out, err = capsys.readouterr()
    assert "warning: tofu_forget10: the runs differ in data" in err
    assert "warning: tofu_forget10: the runs differ in metric modes (a=answer_scoring=all, c=answer_scoring=tofu)" in err
    assert "different package versions (a=0.1.0, c=0.2.0)" in err
    assert "**Provenance differs:**" in (tmp_path / "r.md").read_text()


def test_adapter_folder_loads_its_base_model_on_either_backend(tmp_path):
    from unlearn_app.ci.runner import resolve_model

    base = tmp_path / "base"
    base.mkdir()
    (base / "model.safetensors").write_bytes(b"w")
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": str(base), "r": 24}))
    spec = resolve_model(str(adapter), None)
    assert spec.for_backend("hf") == {"pretrained": str(base), "peft": str(adapter)}
    assert spec.for_backend("vllm") == {"pretrained": str(base), "lora_local_path": str(adapter), "max_lora_rank": 32}
    assert spec.revision.startswith("local:") and "+base=local:" in spec.revision


# --------------------------------------------------------------------------- issue 29: exit codes and limits
def test_deep_nesting_and_long_checks_are_refused_as_syntax_errors():
    deep = "(" * 500 + "tofu_forget10/forget_quality" + ")" * 500 + " >= 0"
    with pytest.raises(CheckSyntaxError, match="nested deeper than 32 levels at column 33"):
        parse_check(deep)
    assert parse_check("(" * 30 + "tofu_forget10/forget_quality" + ")" * 30 + " >= 0").subject is not None
    with pytest.raises(CheckSyntaxError, match="nested deeper than 32"):
        parse_check("-" * 100 + "tofu_forget10/forget_quality >= 0")
    with pytest.raises(CheckSyntaxError, match="longer than the limit of 2000"):
        parse_check("tofu_forget10/forget_quality >= " + "1+" * 1500 + "1")


def test_a_division_by_zero_fails_its_check_and_is_named():
    current = lookup_in({"t": {"a": 0.5, "b": 0.0}})
    outcome = evaluate(parse_check("t/a / t/b >= 1"), current)
    assert not outcome.passed and outcome.message == "FAIL t/a / t/b >= 1: division by zero: t/b is 0"
    outcome = evaluate(parse_check("t/a >= 1 / (t/b * 2)"), current)
    assert not outcome.passed and "division by zero: (t/b * 2) is 0" in outcome.message
    assert "reference" not in outcome.message  # not blamed on a missing reference run


def test_empty_checks_and_alias_bombs_are_refused():
    with pytest.raises(SuiteError, match=":2: checks: the list is empty"):
        parse_suite("tasks: [t]\nchecks: []\n", "s.yaml")
    with pytest.raises(SuiteError, match="checks: missing"):
        parse_suite("tasks: [t]\n", "s.yaml")
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
        f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(8))  # 10^9 values once expanded
    text = "tasks: [tofu_forget10]\nchecks: [tofu_forget10/forget_quality >= 0]\nmetadata:\n  defs:\n    " + \
        bomb.replace("\n", "\n    ").rstrip() + "\n  parts: *i\n"
    with pytest.raises(SuiteError, match=r"s.yaml:3: metadata: holds more than 10000 values once its YAML aliases"):
        parse_suite(text, "s.yaml")


def test_ci_exit_codes_for_errors_that_are_not_failed_checks(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    write_results(run, RESULTS, {"tofu_forget10": provenance_record()})
    suite = _suite(tmp_path, ["tofu_forget10/forget_quality >= 0.05"])
    out = tmp_path / "out"
    base = ["ci", "--suite", str(suite), "--out", str(out)]
    with pytest.raises(SystemExit) as e:  # --limit 0 would be ignored: refused at parse time
        main([*base, "--model", str(tmp_path), "--limit", "0"])
    assert e.value.code == 2 and "argument --limit: must be an integer >= 1, got 0" in capsys.readouterr().err
    assert main([*base, "--from-results", str(run), "--model", "org/m"]) == 2
    assert "--model is not evaluated with --from-results" in capsys.readouterr().err
    (tmp_path / "deep").mkdir()
    deep = _suite(tmp_path / "deep", ["(" * 500 + "tofu_forget10/forget_quality" + ")" * 500 + " >= 0"])
    assert main(["ci", "--suite", str(deep), "--out", str(out), "--from-results", str(run)]) == 2
    assert "nested deeper than 32 levels" in capsys.readouterr().err

    import unlearn_app.ci.runner as runner

    def boom(*args, **kwargs):
        raise RecursionError("x" * 5000)

    monkeypatch.setattr(runner, "check_all", boom)  # any unexpected exception: exit 2, never 1 ("a check failed")
    assert main([*base, "--from-results", str(run), "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: internal error (RecursionError: xxx") and "characters cut" in err and len(err) < 1100
    assert "internal error (RecursionError" in json.loads((out / "results.json").read_text())["error"]


@pytest.mark.parametrize("model_args", [
    {"pretrained": "smollm2", "peft": "ckpt/npo", "chat_template_args": {"date_string": "10 Apr 2025"}},
    'pretrained=smollm2,peft=ckpt/npo,chat_template_args={"date_string": "10 Apr 2025"}',  # as a string
])
def test_summary_names_the_model_as_lm_eval_model_args(tmp_path, model_args):
    """`--from-results` of an `lm_eval` run: the summary names the model as `--model_args` was written (lm-eval's
    results file holds a mapping), not as a Python dict, with the backend."""
    run = tmp_path / "run"
    path = write_results(run, RESULTS)
    raw = json.loads(path.read_text())
    path.write_text(json.dumps({**raw, "config": {"model": "hf", "model_args": model_args}}))
    suite = _suite(tmp_path, ["tofu_forget10/forget_quality >= 0.05"])
    assert main(["ci", "--suite", str(suite), "--from-results", str(run), "--out", str(tmp_path / "out")]) == 0
    expected = 'pretrained=smollm2,peft=ckpt/npo,chat_template_args={"date_string": "10 Apr 2025"}'
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert summary.startswith(f"## unlearn ci: {expected}\n")
    assert f"- model: `{expected}` (hf, revision `unpinned`)" in summary and "{'" not in summary
    assert f"- results: read from `{run}`\n" in summary  # not "evaluated now"
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert record["model"] == {"name": expected, "backend": "hf", "revision": None}
