"""``unlearn judge --prompts mllmu-factuality``: MLLMU-Bench's 1-10 factuality score (the release's
``eval_gpt.py`` rubric in this package's wording) by hand; the generations read from an MLLMU-Bench task's lm-eval
samples; the judge asked through the stand-in OpenAI-compatible server, hostile replies counted as unparsable; the
per-set means re-derived by ``leaderboard validate``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fixtures.commands import run_unlearn_here
from fixtures.judge_server import MLLMU_ITEMS, MLLMU_TASK, judge_server, write_mllmu_run, write_samples_run
from unlearn_app.judge.prompt_files import FOLDER, PromptError, family_prompts, read_prompt
from unlearn_tasks.metrics import judge as verdicts

JUDGED = f"judge_{MLLMU_TASK}"
NAN = math.nan
#: By hand from MLLMU_ITEMS' replies. forget: 10, 2, 3 scored (mean 5, median 3), the fourth reply's last object has
#: an extra key: unparsable. test: 4. retain: 9, 6 scored (mean 7.5); 11 (off the scale) and 8.5 (no whole number)
#: unparsable (taking them would give 26/3 or 23.5/3). celebrity: the release's "Factuality Score" line and a boolean:
#: both unparsable, no mean.
EXPECTED = {"forget_factuality": 5.0, "forget_factuality_unparsable": 1.0, "test_factuality": 4.0,
            "test_factuality_unparsable": 0.0, "retain_factuality": 7.5, "retain_factuality_unparsable": 2.0,
            "celebrity_factuality": NAN, "celebrity_factuality_unparsable": 2.0}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(math.isnan(a[k]) and math.isnan(b[k]) or a[k] == pytest.approx(b[k]) for k in a)


def judge_args(run: Path, out: Path, url: str, *extra: str) -> list:
    return ["judge", run, "--judge", "judge-x", "--backend", "local-completions", "--base-url", url + "/completions",
            "--prompts", "mllmu-factuality", "--cache-dir", out.parent / "cache", "--out", out, *extra]


def test_factuality_prompt_scale_and_aggregate_by_hand():
    prompt = family_prompts("mllmu-factuality")["forget"]
    assert set(family_prompts("mllmu-factuality")) == {"forget", "test", "retain", "celebrity"}
    assert prompt.benchmark == "mllmu" and prompt.max_gen_toks == 700 and prompt.scale == (1, 10, True)
    text = (FOLDER / "mllmu_factuality.txt").read_text()
    assert "eval_gpt.py" in text and "not reproduced" in text  # its source named; our wording, not the release's
    for reply, want in [('{"FACTUALITY": 1}', 1.0), ('x {"FACTUALITY": 9} y\n{"FACTUALITY": 10}', 10.0),
                        ('{"FACTUALITY": 0}', None), ('{"FACTUALITY": 11}', None), ('{"FACTUALITY": 9.0}', None),
                        ('{"FACTUALITY": "9"}', None), ('{"FACTUALITY": 9, "Justification": "ok"}', None),
                        ('"Factuality Score": 9', None), ("", None)]:
        verdict, scores = prompt.verdict(reply)
        assert (verdict, scores) == (("scored", {"FACTUALITY": want}) if want else ("unparsable", None)), reply
    recs = [{"split": "forget", "verdict": "scored", "scores": {"FACTUALITY": x}} for x in (1.0, 1.0, 10.0)] + [
        {"split": "forget", "verdict": "unparsable"}, {"split": "test", "verdict": "unparsable"}]
    out = verdicts.score_aggregate(recs, ("forget", "test", "retain"), "FACTUALITY", "factuality")
    assert out["forget_factuality"] == 4.0 and out["forget_factuality_unparsable"] == 1.0  # mean 4, median 1
    assert math.isnan(out["test_factuality"]) and out["test_factuality_unparsable"] == 1.0 and "retain_factuality" \
        not in out
    with pytest.raises(ValueError, match="not one of scored"):
        verdicts.score_aggregate([{"split": "test", "verdict": "yes"}], ("test",), "FACTUALITY", "factuality")


def test_the_question_is_read_back_from_either_modes_prompt():
    from unlearn_tasks.mllmu.prompts import generation_prompt, generation_question

    for image in (True, False):
        for question in ("Who is she?", "Two\nlines?", "USER: ASSISTANT: odd?"):
            assert generation_question(generation_prompt(question, image)) == question
    assert generation_question("USER: Q?\nJust give ONE letter representing the answer directly.\nASSISTANT:") is None


def test_a_score_prompt_must_fit_its_benchmark(tmp_path):
    head = "name: x\nversion: 1\nfamily: x\nsets: forget\nmax_gen_toks: 9\n"
    body = "---\n{question} {ground_truth} {answer}\n"
    cases = [("benchmark: mllmu\nparse: yes-no\n", "judged by a score"),
             ("benchmark: mllmu\nparse: json-scores\nkeys: F\nverdict_key: F\n", "score is FACTUALITY"),
             ("benchmark: mllmu\nparse: json-scores\nkeys: FACTUALITY\nverdict_key: FACTUALITY\nverdict: yes from 5\n",
              "no 'verdict' line"),
             ("parse: json-scores\nkeys: S\nverdict_key: S\n", "give 'verdict: yes"),
             ("benchmark: mllmu\nparse: json-scores\nkeys: FACTUALITY\nverdict_key: FACTUALITY\nscale: 10-1\n",
              "scale"),
             ("benchmark: muse\nparse: yes-no\n", "benchmark must be one of tofu, mllmu")]
    for extra, message in cases:
        (tmp_path / "p.txt").write_text(head + extra + body)
        with pytest.raises(PromptError, match=message):
            read_prompt(tmp_path / "p.txt")


def test_mllmu_samples_through_the_server_then_the_cache(tmp_path, capsys):
    run = write_mllmu_run(tmp_path / "run")
    out = tmp_path / "judged"
    with judge_server() as server:
        done = run_unlearn_here(judge_args(run, out, server.url, "--judge-revision", "r1"), capsys)
        assert done.returncode == 0, done.stderr
        assert len(server.requests) == len(MLLMU_ITEMS)  # the classification question is not judged
        body = server.requests[0][1]
        assert body["max_tokens"] == 700 and body["temperature"] == 0
        assert "Question: Where was Ana Ruiz born?\nGround-truth answer: Ana Ruiz was born in Lima.\nModel's answer: " \
               "Ana Ruiz was born in Lima.\n" in [b["prompt"] for _, b in server.requests][0]  # the answer as read
        again = run_unlearn_here(judge_args(run, tmp_path / "again", server.url, "--judge-revision", "r1"), capsys)
        assert again.returncode == 0 and len(server.requests) == len(MLLMU_ITEMS)  # all from the cache
        assert f"0 asked, {len(MLLMU_ITEMS)} from the cache" in again.stdout
    raw = json.loads(next(out.glob("results_*.json")).read_text())
    from harness_ext.results import task_metrics

    assert same(task_metrics(raw)[JUDGED], EXPECTED)
    assert raw["higher_is_better"][JUDGED] == {
        "forget_factuality": False, "forget_factuality_unparsable": False, "test_factuality": False,
        "test_factuality_unparsable": False, "retain_factuality": True, "retain_factuality_unparsable": False,
        "celebrity_factuality": True, "celebrity_factuality_unparsable": False}
    prov = raw["configs"][JUDGED]["provenance"]
    assert prov["metric_modes"]["prompts"] == "mllmu-factuality"
    assert prov["prompts"]["celebrity"]["name"] == "mllmu-factuality" and len(prov["prompts"]["test"]["sha256"]) == 64
    rows = [json.loads(x) for x in next(out.glob(f"samples_{JUDGED}_*.jsonl")).read_text().splitlines()]
    assert rows[0]["doc"]["index"] == "forget/generation/0/0" and rows[0]["judge"] == {
        "split": "forget", "index": "forget/generation/0/0", "verdict": "scored", "scores": {"FACTUALITY": 10.0}}
    assert rows[3]["judge"]["verdict"] == "unparsable" and "NOTE" in rows[3]["reply"]


def test_wrong_inputs_for_the_family_are_one_line(tmp_path, capsys):
    tofu = write_samples_run(tmp_path / "tofu")
    done = run_unlearn_here(judge_args(tofu, tmp_path / "o", "http://127.0.0.1:1/v1"), capsys)
    assert done.returncode == 2 and "no samples file of a MLLMU-Bench task" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()
    sample = next((write_mllmu_run(tmp_path / "m")).glob("samples_*.jsonl"))
    done = run_unlearn_here(["judge", sample, "--judge", "j", "--backend", "local-completions", "--base-url",
                             "http://127.0.0.1:1/v1/completions", "--cache-dir", tmp_path / "c", "--out",
                             tmp_path / "o"], capsys)  # the default family is TOFU's
    assert done.returncode == 2 and "no generated answer of the forget, retain, ra, wf sets (TOFU)" in done.stderr
    done = run_unlearn_here(judge_args(sample.parent, tmp_path / "o", "http://127.0.0.1:1/v1/completions",
                                       "--rouge-threshold", "0.5"), capsys)  # the default value, given: still refused
    assert done.returncode == 2 and "--prompts mllmu-factuality does not compare with ROUGE" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_leaderboard_rederives_the_factuality_and_catches_an_edit(tmp_path, capsys):
    from unlearn_app.leaderboard.submission import build, write
    from unlearn_app.leaderboard.validate import check_folder

    run = write_mllmu_run(tmp_path / "run")
    out = tmp_path / "judged"
    with judge_server() as server:
        assert run_unlearn_here(judge_args(run, out, server.url), capsys).returncode == 0
    check = check_folder(write(build([run, out], model_id="org/model", revision="0" * 40, method="ga"),
                               tmp_path / "board"))
    assert check.ok, check.errors
    finite = {k: v for k, v in EXPECTED.items() if not math.isnan(v)}
    assert check.recomputed[JUDGED] == pytest.approx(finite) and JUDGED not in check.unverified

    edited = tmp_path / "edited"  # a record's score raised (its reply says otherwise), an answer swapped
    edited.mkdir()
    for f in out.iterdir():
        text = f.read_text()
        if f.name.startswith("samples_"):
            rows = [json.loads(x) for x in text.splitlines()]
            rows[1]["judge"]["scores"]["FACTUALITY"] = 4.0
            rows[2]["doc"]["answer"] = "She lives in Quito."  # an answer that is not the model's
            text = "".join(json.dumps(r) + "\n" for r in rows)
        (edited / f.name).write_text(text)
    check = check_folder(write(build([run, edited], model_id="org/model", revision="0" * 40, method="ga"),
                               tmp_path / "board2"))
    assert not check.ok and any("document 1: verdict 'scored' stored, but its reply" in e for e in check.errors)
    assert any("document 2: its question, ground truth or answer is not what mllmu_forget05_text's generations hold"
               in e for e in check.errors)

    alone = check_folder(write(build([out], model_id="org/model", revision="0" * 40, method="ga"),
                               tmp_path / "board3"))  # without the generations judged: unverified, not validated
    assert JUDGED in alone.unverified and not alone.recomputed.get(JUDGED)
    assert any(f"{JUDGED}: the judge's numbers are unverified" in n for n in alone.notes)
