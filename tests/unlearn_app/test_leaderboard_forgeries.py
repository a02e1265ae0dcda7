"""The board re-derives what a submission's judge samples carry, and shows no partial evaluation as a whole one.

Judge forgeries, each made as a careful forger would (the edited samples file's hash, the aggregates recomputed
from the edited records, and the id all sealed again): a verdict flipped while its reply still says "Yes", a
``rougeL_recall`` edited with the texts unchanged, an answer replaced with its verdict and ROUGE kept consistent,
an item left out. Each fails validation naming the document; without the judged run's samples (or with a prompt
version the package does not hold) the judge's numbers are unverified, never validated. A run made with
``lm_eval --limit`` is refused by ``unlearn submit`` and the board, and named by ``unlearn report`` and
``unlearn ci --from-results``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from test_leaderboard_hostile import reseal

from fixtures.judge_server import judge_server, write_samples_run
from fixtures.leaderboard import TASK, tofu_records, write_tofu_run
from unlearn_app.cli import main
from unlearn_app.judge.results import aggregates_from_samples
from unlearn_app.leaderboard.submission import build, write
from unlearn_app.leaderboard.validate import check_folder

SOURCE = "tofu_forget01_rouge"  # the judged task of fixtures.judge_server
JUDGED = f"judge_{SOURCE}"
SAMPLES = f"samples/{JUDGED}.jsonl"


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory):
    """An evaluation run (its generations) and `unlearn judge`'s output over it (the stand-in server's verdicts)."""
    tmp = tmp_path_factory.mktemp("judged")
    run = write_samples_run(tmp / "run")
    with judge_server() as server:
        assert main(["judge", str(run), "--judge", "judge-x", "--backend", "local-completions", "--base-url",
                     server.url + "/completions", "--cache-dir", str(tmp / "cache"), "--out", str(tmp / "out")]) == 0
    return run, tmp / "out"


def submitted(tmp_path: Path, runs: list[Path]) -> Path:
    return write(build(runs, model_id="org/model", revision="0" * 40, method="ga"), tmp_path / "board")


def forged(folder: Path, edit) -> Path:
    """``folder``'s judge samples edited line by line (``edit(rows)``), the aggregates recomputed from the edited
    records, everything sealed again."""
    rows = [json.loads(x) for x in (folder / SAMPLES).read_text().splitlines()]
    edit(rows)
    (folder / SAMPLES).write_text("".join(json.dumps(r) + "\n" for r in rows))
    again = aggregates_from_samples(rows, 0.5)

    def aggregates(record):
        record["results"][JUDGED]["aggregates"] = {k: v for k, v in again.items() if not math.isnan(v)}

    return reseal(folder, aggregates)


def failed_naming(folder: Path, *words: str):
    check = check_folder(folder)
    assert check.kind == "failed" and any(all(w in e for w in words) for e in check.errors), check.errors
    return check


def test_genuine_judge_samples_validate_and_without_their_evaluation_are_unverified(judged_run, tmp_path, capsys):
    run, out = judged_run
    check = check_folder(submitted(tmp_path / "with", [run, out]))
    assert check.validated, check.errors
    assert len(check.recomputed[JUDGED]) == 13  # every finite judge aggregate
    alone = submitted(tmp_path / "alone", [out])
    check = check_folder(alone)
    assert check.ok and not check.validated and check.kind == "partly verified" and JUDGED not in check.recomputed
    assert check.notes == [f"{JUDGED}: the judge's numbers are unverified: the generations of {SOURCE} (its lm-eval "
                           "samples, or open-unlearning's TOFU_EVAL.json), whose answers it judged, are not in the "
                           "submission: submit that evaluation with it"]
    capsys.readouterr()
    assert main(["leaderboard", "validate", str(alone)]) == 0
    out = capsys.readouterr().out
    assert "partly verified (0 of 13)" in out and f"  note: {check.notes[0]}" in out
    assert main(["leaderboard", "build", "--from", str(alone.parent), "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "submissions" / f"{alone.name}.html").read_text()
    assert "<h2>Not verified</h2>" in page and "whose answers it judged, are not in the submission" in page


def test_a_flipped_verdict_whose_reply_says_yes_fails(judged_run, tmp_path):
    def flip(rows):
        assert rows[0]["reply"] == " Yes" and rows[0]["judge"]["verdict"] == "yes"
        rows[0]["judge"]["verdict"] = "no"

    check = failed_naming(forged(submitted(tmp_path, list(judged_run)), flip),
                          "document 0: verdict 'no' stored, but its reply ' Yes' gives 'yes' by yes-no-forget")
    assert "forget_judge_revealed" in check.mismatched[JUDGED]  # 0.5 recomputed, 0 submitted


def test_an_edited_rouge_recall_fails(judged_run, tmp_path):
    def edit(rows):
        assert rows[1]["judge"]["rougeL_recall"] == pytest.approx(0.4)  # 2 of the truth's 5 words
        rows[1]["judge"]["rougeL_recall"] = 0.5

    failed_naming(forged(submitted(tmp_path, list(judged_run)), edit),
                  "document 1: rougeL_recall 0.5 stored, but 0.4 recomputed from its answer and ground truth")


def test_a_replaced_answer_fails_against_the_runs_own_samples(judged_run, tmp_path):
    """The answer is replaced and its ROUGE made to agree; only the evaluation's own generation tells."""
    from unlearn_tasks.metrics.rouge import rouge_l_recall

    def replace(rows):
        doc = rows[1]["doc"]
        doc["answer"] = "She wrote nothing at all."
        rows[1]["judge"]["rougeL_recall"] = rouge_l_recall(doc["ground_truth"], doc["answer"])

    failed_naming(forged(submitted(tmp_path, list(judged_run)), replace),
                  f"document 1: its question, ground truth or answer is not what {SOURCE}'s generations hold for "
                  "forget item 1")


def test_a_judged_item_left_out_fails_and_an_unknown_prompt_version_is_unverified(judged_run, tmp_path):
    failed_naming(forged(submitted(tmp_path / "a", list(judged_run)), lambda rows: rows.pop(2)),
                  f"1 of the 7 generated answers of {SOURCE} are not judged")

    def huge(rows):  # ROUGE-L is quadratic: a validator is not kept busy for minutes
        rows[0]["doc"]["ground_truth"] = rows[0]["doc"]["answer"] = "word " * 600

    failed_naming(forged(submitted(tmp_path / "c", list(judged_run)), huge),
                  "document 0: its ground truth (600 words) and answer (600 words) are too long to recompute ROUGE-L")

    def version(record):
        record["results"][JUDGED]["provenance"]["prompts"]["forget"]["version"] = "99"

    check = check_folder(reseal(submitted(tmp_path / "b", list(judged_run)), version))
    assert check.ok and JUDGED not in check.recomputed and check.kind == "partly verified"
    assert "its forget prompt (yes-no-forget version 99) is not one this package holds" in check.notes[0]


def test_an_open_unlearning_runs_generations_check_its_judge_samples_too(tmp_path):
    from fixtures.judge_server import write_ou_run

    ou = write_ou_run(tmp_path / "tofu_forget01")
    with judge_server() as server:
        assert main(["judge", str(ou), "--judge", "judge-x", "--backend", "local-completions", "--base-url",
                     server.url + "/completions", "--cache-dir", str(tmp_path / "cache"), "--out",
                     str(tmp_path / "out")]) == 0
    check = check_folder(submitted(tmp_path / "b", [ou, tmp_path / "out"]))
    judge_task = next(t for t in check.record["results"] if t.startswith("judge_"))
    assert check.ok and len(check.recomputed[judge_task]) == 13, (check.errors, check.notes)
    logs = json.loads((ou / "TOFU_EVAL.json").read_text())
    logs["forget_Q_A_ROUGE"]["value_by_index"]["1"]["generation"] = "Something else."
    (ou / "TOFU_EVAL.json").write_text(json.dumps(logs))  # the judge's answer is no longer the run's
    failed_naming(submitted(tmp_path / "c", [ou, tmp_path / "out"]), "document 1: its question, ground truth or "
                  "answer is not what tofu_forget01's generations hold for forget item 1")


# --------------------------------------------------------------------------- partial evaluations (lm_eval --limit)
def limited(results_file: Path, limit=4, original=24, effective=4) -> Path:
    """The results file as ``lm_eval --limit`` writes it: ``config.limit`` and the task's ``n-samples``."""
    raw = json.loads(results_file.read_text())
    raw["config"] = {"model": "hf", "limit": limit}
    raw["n-samples"] = {task: {"original": original, "effective": effective} for task in raw["results"]}
    results_file.write_text(json.dumps(raw))
    return results_file


def test_what_counts_as_partial():
    from harness_ext.results import partial_tasks

    def of(limit, original, effective):
        return partial_tasks({"config": {"limit": limit}, "results": {"t": {}},
                              "n-samples": {"t": {"original": original, "effective": effective}}})

    assert of(4, 24, 4) == {"t": "4 of 24 documents (lm_eval --limit 4)"}
    assert of(None, 24, 23) == {"t": "23 of 24 documents (fewer documents than the task has)"}
    assert of(30, 24, 24) == {}  # a limit above the task's size evaluates it whole
    assert partial_tasks({"config": {"limit": 0.5}, "results": {"group": {}}}) == {
        "group": "part of its documents (lm_eval --limit 0.5)"}
    assert partial_tasks({"config": {"limit": None}, "results": {"t": {}}}) == {}


def test_a_partial_evaluation_is_refused_by_submit_and_the_board_and_named_by_report_and_ci(tmp_path, capsys):
    ref = tmp_path / "ref"
    write_tofu_run(ref, tofu_records(1))
    whole, part = tmp_path / "npo", tmp_path / "cut"
    write_tofu_run(whole, tofu_records(2, 0.3), tofu_records(1))
    limited(write_tofu_run(part, tofu_records(2, 0.3), tofu_records(1)))
    sub = ["--model-id", "me/npo", "--revision", "a" * 40, "--method", "npo", "--to", str(tmp_path / "board")]
    capsys.readouterr()
    assert main(["submit", str(part), "--reference", str(ref), *sub]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{TASK} is a partial evaluation: 4 of 24 documents (lm_eval --limit 4); the board " \
        "shows whole evaluations only: rerun lm_eval without --limit" in err[0], err
    assert not (tmp_path / "board").exists()
    limited(next((ref / "model").glob("results_*.json")))  # a partial reference
    assert main(["submit", str(whole), "--reference", str(ref), *sub]) == 2
    assert f"--reference {ref} is a partial evaluation: {TASK} (4 of 24 documents" in capsys.readouterr().err
    # made by hand (or an older version): the record says so, the board refuses it and builds the site without it
    built = build([part], model_id="me/npo", revision="a" * 40, method="npo")
    assert built.record["results"][TASK]["documents"] == {"original": 24, "effective": 4}
    folder = write(built, tmp_path / "hand" / "submissions")
    assert main(["leaderboard", "validate", str(folder)]) == 2
    assert "refused: tofu_forget01 is a partial evaluation: 4 of 24 documents" in capsys.readouterr().out
    assert main(["leaderboard", "build", "--from", str(tmp_path / "hand"), "--out", str(tmp_path / "site")]) == 0
    assert "skipped" in capsys.readouterr().err and not (tmp_path / "site" / "submissions" / f"{folder.name}.html").exists()
    # unlearn report and unlearn ci --from-results name it
    assert main(["report", str(part)]) == 0
    out, err = capsys.readouterr()
    line = f"cut: {TASK} is a partial evaluation, 4 of 24 documents (lm_eval --limit 4)"
    assert "**Partial evaluations**" in out and f"- {line}" in out and f"warning: {line}" in err
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"tasks: [{TASK}]\nchecks:\n  - {TASK}/forget_prob <= 1\n")
    assert main(["ci", "--suite", str(suite), "--from-results", str(part), "--out", str(tmp_path / "ci")]) == 0
    assert f"unlearn ci: warning: {TASK} is a partial evaluation, 4 of 24 documents" in capsys.readouterr().out
    assert json.loads((tmp_path / "ci" / "results.json").read_text())["partial"] == {
        TASK: "4 of 24 documents (lm_eval --limit 4)"}
    assert f"**partial evaluation**: `{TASK}` on 4 of 24 documents" in (tmp_path / "ci" / "summary.md").read_text()
