"""``unlearn depth``'s results on the leaderboard: ``unlearn submit`` carries the per-question, per-layer scores
(``depth/<task>.json``, listed and hashed) and ``leaderboard validate`` recomputes the UDS from them with the
command's score function, by hand on a small table; edits, hostile values and a bad threshold."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from unlearn_app.leaderboard.submission import Built, build, digest, sha256, write
from unlearn_app.leaderboard.validate import check_folder

TASK = "tofu_forget10_uds"
FILE = f"depth/{TASK}.json"
TAU = 0.05
#: Per question: the unpatched score and the per-layer drops d1 (stage 1) and d2 (stage 2), dyadic so that the
#: scores ``full - d`` and back are exact. KE layers: d1 > 0.05.
#: q0: KE 0, 1, 2 (d1 0.5, 1, 0.25); erasure ratios clip(d2/d1) = 1, 0.25, 1 (0.5/0.25 = 2 clipped); d1-weighted:
#:     (0.5 * 1 + 1 * 0.25 + 0.25 * 1) / 1.75 = 4/7 (their plain mean 0.75, their median 1).
#: q1: KE 1, 2, 3 (0.04 is under tau); ratios 0 (-0.5 clipped), 0.5, 0.5; weighted (0 + 0.25 + 0.5) / 2 = 3/8
#:     (plain mean 1/3, median 0.5).
#: q2: no KE layer (0.05 is not above tau): undefined, left out of the mean.
#: q3: KE 0 only: 0.5 / 2 = 1/4.
#: Overall: (4/7 + 3/8 + 1/4) / 3 = 67/168 (median of the three 3/8; counting q2 as 0: 67/224).
TABLE = [
    (-1.0, [0.5, 1.0, 0.25, 0.0], [0.5, 0.25, 0.5, 0.75]),
    (-2.0, [0.04, 0.5, 0.5, 1.0], [1.0, -0.25, 0.25, 0.5]),
    (0.0, [0.05, 0.0, -0.5, 0.01], [0.5, 0.5, 0.5, 0.5]),
    (-0.5, [2.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0]),
]
PER_QUESTION = [4 / 7, 3 / 8, None, 1 / 4]
UDS = 67 / 168


def depth_results(uds: float = UDS, per_question=PER_QUESTION, tau=TAU) -> dict:
    """A results file as ``unlearn depth`` writes it, for :data:`TABLE` (one question skipped)."""
    per_item = [{"index": n, "question": f"Q{n}?", "span": "x", "full": full, "s1": [full - d for d in d1],
                 "s2": [full - d for d in d2], "ke_layers": [], "uds": u}
                for n, ((full, d1, d2), u) in enumerate(zip(TABLE, per_question))]
    modes = {"prompt_format": "release", "span": "answer", "tau": tau, "layers": [0, 1, 2, 3],
             "states": "hidden_states", "dtype": "float32", "batch_size": 8, "limit": None, "entities": None}
    return {
        "results": {TASK: {"alias": TASK, "uds,none": uds, "scored,none": 3, "without_ke_layer,none": 1,
                           "skipped,none": 1}},
        "higher_is_better": {TASK: {"uds": True}},
        "configs": {TASK: {"task": TASK, "provenance": {"package": "lm-eval-unlearning", "version": "0.1.0",
                                                        "git_commit": "c" * 40, "metric_modes": modes},
                           "models": {}, "per_layer": [], "per_item": per_item,
                           "skipped": [{"index": 9, "question": "Q9?", "reason": "no annotation"}]}},
        "config": {"model": "unlearn depth", "device": "cpu"}, "date": 0.0,
    }


def submitted(tmp: Path, raw: dict, name: str = "run") -> Built:
    folder = tmp / name
    folder.mkdir()
    (folder / "results_uds.json").write_text(json.dumps(raw))
    return build([folder], model_id="org/model", revision="0" * 40, method="npo")


def validate(tmp: Path, built: Built, board: str = "board"):
    return check_folder(write(built, tmp / board))


def resealed(built: Built, data: bytes) -> Built:
    """``built`` with its depth file replaced by ``data``, hashes and id made to agree again (an attacker's edit)."""
    record = copy.deepcopy(built.record)
    record["files"][FILE] = sha256(data)
    record["id"] = record["id"][:-12] + digest(record)[:12]
    return Built(record, built.files | {FILE: data})


def test_the_submission_carries_the_per_layer_scores_and_the_uds_is_recomputed_by_hand(tmp_path):
    built = submitted(tmp_path, depth_results())
    entry = built.record["results"][TASK]
    assert entry["depth"] == FILE and built.record["files"][FILE] == sha256(built.files[FILE])
    assert "samples" not in " ".join(built.notes)  # not listed as a task without per-item values
    carried = json.loads(built.files[FILE])
    assert [i["s1"] for i in carried["per_item"]][0] == [-1.5, -2.0, -1.25, -1.0]
    check = validate(tmp_path, built)
    assert check.ok, check.errors
    assert check.recomputed[TASK] == pytest.approx({"uds": UDS, "scored": 3, "without_ke_layer": 1, "skipped": 1},
                                                   rel=1e-12)
    assert check.validated and check.status == "validated"
    assert UDS != pytest.approx(3 / 8) and UDS != pytest.approx(67 / 224)  # not the median, not q2 counted as 0


def test_an_edited_aggregate_is_exactly_one_mismatch(tmp_path):
    check = validate(tmp_path, submitted(tmp_path, depth_results(uds=0.5)))
    assert check.mismatched == {TASK: ["uds"]} and len(check.errors) == 1
    assert check.errors[0].endswith(f"{TASK}/uds = 0.5 submitted, but 0.39881 recomputed from its per-layer scores "
                                    f"({FILE})")
    assert check.status == "failed"


def test_an_edited_per_layer_score_changes_the_recomputed_uds(tmp_path):
    raw = depth_results()
    raw["configs"][TASK]["per_item"][3]["s2"][0] = -0.5 - 1.0  # q3's d2 0.5 -> 1.0: ratio 1/2, UDS (4/7+3/8+1/2)/3
    check = validate(tmp_path, submitted(tmp_path, raw))
    assert check.recomputed[TASK]["uds"] == pytest.approx((4 / 7 + 3 / 8 + 1 / 2) / 3, rel=1e-12)
    assert check.mismatched == {TASK: ["uds"]}
    assert any("question 3: UDS 0.25 shown, 0.5 recomputed from its per-layer scores" in e for e in check.errors)


def test_a_per_question_uds_shown_is_checked_too(tmp_path):
    check = validate(tmp_path, submitted(tmp_path, depth_results(per_question=[4 / 7, 0.9, None, 1 / 4])))
    assert check.errors == [f"{check.id}: {TASK}: question 1: UDS 0.9 shown, 0.375 recomputed from its per-layer "
                            "scores"]
    assert check.mismatched == {} and not check.validated
    check = validate(tmp_path, submitted(tmp_path, depth_results(per_question=[4 / 7, 3 / 8, 0.0, 1 / 4]), "b"), "b2")
    assert check.errors == [f"{check.id}: {TASK}: question 2: UDS 0 shown, undefined (no KE layer) recomputed from "
                            "its per-layer scores"]


def test_no_ke_layer_anywhere_leaves_the_uds_undefined(tmp_path):
    raw = depth_results()
    raw["results"][TASK] = {"alias": TASK, "uds,none": None, "scored,none": 0, "without_ke_layer,none": 1,
                            "skipped,none": 1}
    raw["configs"][TASK]["per_item"] = raw["configs"][TASK]["per_item"][2:3]  # q2 only
    check = validate(tmp_path, submitted(tmp_path, raw))
    assert check.validated, check.errors
    assert check.recomputed[TASK] == {"scored": 0.0, "without_ke_layer": 1.0, "skipped": 1.0}
    raw["results"][TASK]["uds,none"] = 0.3  # a number where none is defined
    check = validate(tmp_path, submitted(tmp_path, raw, "b"), "b2")
    assert check.mismatched == {TASK: ["uds"]}
    assert "uds = 0.3 submitted, but undefined (no question has a KE layer) recomputed" in check.errors[0]


@pytest.mark.parametrize("tau, words", [
    (None, "its options record no tau"), (-0.1, "its options' tau '-0.1' is not a finite number >= 0"),
    ("0.05", "its options' tau '0.05' is not a finite number >= 0"), (True, "its options' tau 'True' is not a finite number >= 0"),
])
def test_a_missing_or_out_of_range_threshold_is_refused_in_one_line(tmp_path, tau, words):
    raw = depth_results(tau=tau)
    if tau is None:
        del raw["configs"][TASK]["provenance"]["metric_modes"]["tau"]
    check = validate(tmp_path, submitted(tmp_path, raw))
    assert check.refused and len(check.errors) == 1 and "\n" not in check.errors[0]
    assert check.errors[0] == f"{check.id}: refused: {TASK}: {words}" + (
        " (the KE-layer threshold the UDS was computed at)" if tau is None else "")


@pytest.mark.parametrize("edit, words", [
    (lambda t: t.replace('-1.5', 'NaN', 1), "NaN is not a number JSON allows"),
    (lambda t: t.replace('-1.5', '1e400', 1), "the number 1e400... is too large"),
])
def test_unparsable_numbers_in_the_table_are_refused(tmp_path, edit, words):
    built = submitted(tmp_path, depth_results())
    check = validate(tmp_path, resealed(built, edit(built.files[FILE].decode()).encode()))
    assert check.refused and len(check.errors) == 1 and words in check.errors[0], check.errors


@pytest.mark.parametrize("edit, words", [
    (lambda i: i[0]["s1"].__setitem__(1, "0.5"), "per_item[0].s1[1] is '0.5', not a finite number"),
    (lambda i: i[1].__setitem__("full", None), "per_item[1].full is 'None', not a finite number"),
    (lambda i: i[2]["s2"].pop(), "per_item[2] has 4 stage-1 and 3 stage-2 layers"),
    (lambda i: [i[3][k].pop() for k in ("s1", "s2")], "per_item[3] has 3 layers, per_item[0] 4"),
    (lambda i: i.__setitem__(0, "q"), "per_item[0] is not an object with full, s1, s2"),
    (lambda i: i[0].__setitem__("uds", [1]), "per_item[0].uds is '[1]', not a finite number"),
])
def test_hostile_values_in_the_table_are_one_line_errors(tmp_path, edit, words):
    raw = depth_results()
    edit(raw["configs"][TASK]["per_item"])
    check = validate(tmp_path, submitted(tmp_path, raw))
    assert check.status == "failed" and len(check.errors) == 1, check.errors
    assert check.errors[0] == f"{check.id}: {TASK}: cannot recompute the UDS from {FILE} ({words})"


def test_a_nan_written_by_the_run_is_carried_as_null_and_fails_in_one_line(tmp_path):
    raw = depth_results()
    raw["configs"][TASK]["per_item"][0]["s2"][2] = float("nan")
    check = validate(tmp_path, submitted(tmp_path, raw))
    assert check.errors == [f"{check.id}: {TASK}: cannot recompute the UDS from {FILE} (per_item[0].s2[2] is 'None', "
                            "not a finite number)"]


def test_an_unlisted_depth_file_is_an_integrity_error(tmp_path):
    built = submitted(tmp_path, depth_results())
    record = copy.deepcopy(built.record)
    del record["files"][FILE]
    record["id"] = record["id"][:-12] + digest(record)[:12]
    check = validate(tmp_path, Built(record, {}))
    assert check.errors == [f"{check.id}: {FILE} is named by a result but not listed (with its hash) in files"]
