"""Which samples file holds a task's samples, on either lm-eval line: 0.4.13 writes ``samples_<task>_<date>.jsonl``,
0.5 writes a task it ran through a group as ``samples_<group>::<task>_<date>.jsonl`` (its ``_qualified_name``; a task
of a subgroup under the subgroup's name) and qualifies the task's keys in the results file the same way. Every
reader (``unlearn judge``, ``unlearn submit``, ``unlearn export-ou``; ``leaderboard validate`` reads what submit
carried) finds the file through :func:`harness_ext.results.samples_files`."""

from __future__ import annotations

import json
import os

import pytest

from harness_ext.results import plain_task_names, read_results_file, samples_file_task, samples_files

OLD = "2026-05-11T10-00-00.000001"
NEW = "2026-05-12T09-30-00.123456"


@pytest.mark.parametrize("name, task, date", [
    (f"samples_tofu_forget10_{NEW}.jsonl", "tofu_forget10", NEW),
    (f"samples_tofu::tofu_forget10_{NEW}.jsonl", "tofu::tofu_forget10", NEW),
    (f"samples_mllmu_forget10::mllmu_forget10_image_{NEW}.jsonl", "mllmu_forget10::mllmu_forget10_image", NEW),
    (f"samples_a::b.c::d-e_{OLD}.jsonl", "a::b.c::d-e", OLD),
    (f"samples_judge_tofu_forget01_rouge_{OLD}.jsonl", "judge_tofu_forget01_rouge", OLD),
    (f"samples_::tofu_forget10_{NEW}.jsonl", None, None),  # an empty group
    (f"samples_tofu:::tofu_forget10_{NEW}.jsonl", None, None),
    (f"samples_tofu:tofu_forget10_{NEW}.jsonl", None, None),
    (f"samples_../tofu_{NEW}.jsonl", None, None),
    (f"samples_tofu_forget10_{NEW}.json", None, None),
    ("samples_tofu_forget10_latest.jsonl", None, None),
])
def test_samples_file_names_of_both_lines(name, task, date):
    assert samples_file_task(name) == ((task, date) if task else None)


def _write(folder, *names):
    for name in names:
        (folder / name).write_text(json.dumps({"doc_id": 0, "doc": {"name": name}}) + "\n")


def test_the_file_of_the_results_date_plain_or_qualified_else_the_newest(tmp_path):
    results = tmp_path / f"results_{NEW}.json"
    results.write_text("{}")
    _write(tmp_path, f"samples_tofu_forget10_{OLD}.jsonl", f"samples_tofu::tofu_forget10_{NEW}.jsonl",
           f"samples_tofu::tofu_forget05_{OLD}.jsonl", f"samples_muse_news_verbmem_{NEW}.jsonl",
           f"samples_tofu_forget10_rouge_{NEW}.jsonl")
    # lm-eval 0.5's file of this run, not 0.4.13's of an older run in the same folder, nor a task whose name extends it
    assert samples_files(results, "tofu_forget10") == [tmp_path / f"samples_tofu::tofu_forget10_{NEW}.jsonl"]
    assert samples_files(results, "tofu_forget05") == [tmp_path / f"samples_tofu::tofu_forget05_{OLD}.jsonl"]
    assert samples_files(results, "muse_news_verbmem") == [tmp_path / f"samples_muse_news_verbmem_{NEW}.jsonl"]
    assert samples_files(results, "tofu::tofu_forget10") == [tmp_path / f"samples_tofu::tofu_forget10_{NEW}.jsonl"]
    assert samples_files(results, "forget10") == samples_files(results, "tofu") == []
    # a file named exactly as the task wins over a group's of the same date
    _write(tmp_path, f"samples_tofu_forget10_{NEW}.jsonl")
    assert samples_files(results, "tofu_forget10") == [tmp_path / f"samples_tofu_forget10_{NEW}.jsonl"]


def test_two_groups_files_of_one_task_are_not_guessed_between_and_links_not_followed(tmp_path):
    results = tmp_path / f"results_{NEW}.json"
    results.write_text("{}")
    _write(tmp_path, f"samples_g1::arc_easy_{NEW}.jsonl", f"samples_g2::arc_easy_{NEW}.jsonl")
    assert samples_files(results, "arc_easy") == []
    assert samples_files(results, "g2::arc_easy") == [tmp_path / f"samples_g2::arc_easy_{NEW}.jsonl"]
    _write(tmp_path, f"samples_x_{OLD}.jsonl")
    os.symlink(tmp_path / f"samples_x_{OLD}.jsonl", tmp_path / f"samples_g::x_{NEW}.jsonl")
    assert samples_files(results, "x") == [tmp_path / f"samples_x_{OLD}.jsonl"]


def test_results_of_0_5_read_with_plain_task_names_unless_two_groups_share_one():
    data = {"results": {"tofu": {"alias": "tofu"}, "tofu::tofu_forget10": {"forget_prob,none": 0.5},
                        "g1::arc_easy": {"acc,none": 0.1}, "g2::arc_easy": {"acc,none": 0.2}},
            "configs": {"tofu::tofu_forget10": {"task": "tofu_forget10"}}, "n-samples": {"tofu::tofu_forget10": {}},
            "group_subtasks": {"tofu": ["tofu::tofu_forget10"], "g1": ["g1::arc_easy"]}}
    plain = plain_task_names(data)
    assert list(plain["results"]) == ["tofu", "tofu_forget10", "g1::arc_easy", "g2::arc_easy"]
    assert list(plain["configs"]) == list(plain["n-samples"]) == ["tofu_forget10"]
    assert plain["group_subtasks"] == {"tofu": ["tofu_forget10"], "g1": ["g1::arc_easy"]}


def test_a_results_file_of_0_5_is_read_plain(tmp_path):
    path = tmp_path / f"results_{NEW}.json"
    path.write_text(json.dumps({"results": {"lume::lume_task1": {"regurgitation_score,none": 0.25}}}))
    assert read_results_file(path)["results"] == {"lume_task1": {"regurgitation_score,none": 0.25}}
