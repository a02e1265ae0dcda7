"""The loader: local folders, the environment variable, and errors that say what to fix."""

import json

import datasets
import pytest

from unlearn_tasks import dataset_loader
from unlearn_tasks.tofu.documents import build_docs


def _write(folder, config, rows):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{config}.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_local_folder_and_env_var(tmp_path, monkeypatch):
    _write(tmp_path / "explicit", "forget01", [{"question": "q", "answer": "a"}])
    ds = dataset_loader.load_config("locuslab/TOFU", "forget01", ("question", "answer"), data_dir=tmp_path / "explicit")
    assert ds.to_list() == [{"question": "q", "answer": "a"}]

    _write(tmp_path / "root" / "locuslab" / "TOFU", "forget01", [{"question": "q2", "answer": "a2"}])
    monkeypatch.setenv(dataset_loader.DATA_DIR_ENV, str(tmp_path / "root"))
    assert dataset_loader.load_config("locuslab/TOFU", "forget01")["question"] == ["q2"]


def test_json_array_files_are_accepted(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps([{"question": "q", "answer": "a"}]))
    assert len(dataset_loader.load_config("x/y", "c", data_dir=tmp_path)) == 1


def test_missing_config_names_the_expected_file(tmp_path):
    with pytest.raises(dataset_loader.DataError, match=r"No file for config 'holdout10' in .*holdout10\.json"):
        dataset_loader.load_config("locuslab/TOFU", "holdout10", data_dir=tmp_path)


def test_missing_column_names_file_and_column(tmp_path):
    _write(tmp_path, "forget10_perturbed", [{"question": "q", "answer": "a"}])
    with pytest.raises(dataset_loader.DataError, match=r"forget10_perturbed\.json lacks the column\(s\) \['paraphrased_answer'"):
        dataset_loader.load_config("locuslab/TOFU", "forget10_perturbed", ("question", "answer", "paraphrased_answer"), data_dir=tmp_path)


def test_bad_json_line_is_reported(tmp_path):
    (tmp_path / "c.json").write_text('{"question": "q"}\n{oops\n')
    with pytest.raises(dataset_loader.DataError, match="line 2 is not valid JSON"):
        dataset_loader.load_config("x/y", "c", data_dir=tmp_path)


def test_missing_data_dir(tmp_path):
    with pytest.raises(dataset_loader.DataError, match="does not exist"):
        dataset_loader.load_config("x/y", "c", data_dir=tmp_path / "absent")


def test_hub_errors_become_actionable(monkeypatch):
    def offline(*a, **k):
        raise ConnectionError("Couldn't reach the Hub")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    monkeypatch.delenv(dataset_loader.DATA_DIR_ENV, raising=False)
    with pytest.raises(dataset_loader.DataError, match=r"hf download locuslab/TOFU .*data_dir"):
        dataset_loader.load_config("locuslab/TOFU", "forget10")

    def gated(*a, **k):
        raise PermissionError("403 Client Error: this dataset is gated")

    monkeypatch.setattr(datasets, "load_dataset", gated)
    with pytest.raises(dataset_loader.DataError, match=r"is gated\. Accept its terms .*HF_TOKEN"):
        dataset_loader.load_config("Exploration-Lab/ReLU", "mcqa")


def test_docs_interleave_every_set_so_limit_keeps_them_all(demo_data_dir):
    docs = build_docs("forget10", data_dir=demo_data_dir)
    assert [d["split"] for d in docs[:5]] == ["forget", "retain", "ra", "wf", "holdout"]
    counts = {s: sum(d["split"] == s for d in docs) for s in ("forget", "retain", "ra", "wf", "holdout")}
    assert counts == {"forget": 24, "retain": 24, "ra": 10, "wf": 10, "holdout": 24}
    assert all(len(d["perturbed_answers"]) == 3 for d in docs if d["split"] != "holdout")
    assert len(build_docs("forget10", data_dir=demo_data_dir, max_items_per_split=3)) == 15


# ------------------------------------------------------------------ issue 12, item 5: every row is validated
def _demo_copy(demo_data_dir, tmp_path, config, edit):
    """A copy of the demo data with ``edit(rows)`` applied to one config's rows."""
    import shutil

    folder = shutil.copytree(demo_data_dir, tmp_path / "data")
    path = folder / f"{config}.json"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    edit(rows)
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return folder, path


def test_row_missing_paraphrased_answer_is_named_not_scored_against_empty_text(demo_data_dir, tmp_path):
    folder, path = _demo_copy(demo_data_dir, tmp_path, "forget01_perturbed", lambda rows: rows[2].pop("paraphrased_answer"))
    with pytest.raises(dataset_loader.DataError, match=rf"{path}: row 3 has no 'paraphrased_answer' \(None\)"):
        build_docs("forget01", data_dir=folder)


@pytest.mark.parametrize("value, what", [(None, "no"), ("", "an empty or non-text"), (7, "'answer' of type number")])
def test_null_or_empty_answer_is_named_in_tasks_and_training(demo_data_dir, tmp_path, value, what):
    from unlearn_methods.forget_retain import load_qa

    folder, path = _demo_copy(demo_data_dir, tmp_path, "retain_perturbed", lambda rows: rows[0].update(answer=value))
    with pytest.raises(dataset_loader.DataError, match=rf"{path}: row 1 has {what}"):
        build_docs("forget01", data_dir=folder)
    _, path = _demo_copy(demo_data_dir, tmp_path / "b", "forget01", lambda rows: rows[1].update(answer=value))
    with pytest.raises(dataset_loader.DataError, match=rf"{path}: row 2 has {what}"):
        load_qa("forget01", data_dir=str(path.parent))


def test_empty_perturbed_answers_are_named(demo_data_dir, tmp_path):
    folder, path = _demo_copy(demo_data_dir, tmp_path, "world_facts_perturbed",
                              lambda rows: rows[1].update(perturbed_answer=["x", ""]))
    with pytest.raises(dataset_loader.DataError, match=rf"{path}: row 2 has no usable 'perturbed_answer'"):
        build_docs("forget01", data_dir=folder)


def test_read_json_lines_gives_number_text_and_value_of_each_non_blank_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n\n  "s"  \n[1, 2]\n')
    assert dataset_loader.read_json_lines(path) == [(1, '{"a": 1}', {"a": 1}), (3, '"s"', "s"), (4, "[1, 2]", [1, 2])]
    assert dataset_loader.read_json_lines(path, text='7\n') == [(1, "7", 7)]  # the text given, not the file's


def test_read_json_lines_errors_name_the_line_or_keep_plain_text(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('1\n\nplain words\n')
    with pytest.raises(dataset_loader.DataError, match=r"x\.jsonl: line 3 is not valid JSON \(Expecting value\)\.$"):
        dataset_loader.read_json_lines(path)
    with pytest.raises(KeyError, match="3"):
        dataset_loader.read_json_lines(path, error=lambda n, e: KeyError(n))
    assert [line.value for line in dataset_loader.read_json_lines(path, plain_text=True)] == [1, "plain words"]


def test_readme_data_files_reads_the_hubs_configs_list(tmp_path):
    from unlearn_tasks.dataset_loader import DataError, readme_data_files

    assert readme_data_files(tmp_path, "a") == []  # no README
    (tmp_path / "README.md").write_text(
        "---\nconfigs:\n- config_name: a\n  data_files:\n  - split: train\n    path: a/train.json\n"
        "  - split: test\n    path: [a/test-1.parquet, a/test-2.parquet]\n"
        "- config_name: b\n  data_files: b.json\n---\n# card\n")
    assert readme_data_files(tmp_path, "a") == ["a/train.json", "a/test-1.parquet", "a/test-2.parquet"]
    assert readme_data_files(tmp_path, "a", "test") == ["a/test-1.parquet", "a/test-2.parquet"]
    assert readme_data_files(tmp_path, "b") == ["b.json"] and readme_data_files(tmp_path, "b", "train") == []
    assert readme_data_files(tmp_path, "c") == []
    (tmp_path / "README.md").write_text("---\nconfigs: [\n---\n")
    with pytest.raises(DataError, match="front matter is not valid YAML"):
        readme_data_files(tmp_path, "a")
