"""ReLU data: the local layouts, the errors that say what to fix, and the demo corpus in the ReLU formats."""

import json

import datasets
import pytest

from fixtures.tofu_formats import write_fixture
from unlearn_methods.scaffolding.tofu_corpus import FORGET_AUTHORS, _facts, build_corpus
from unlearn_methods.scaffolding.tofu_formats_corpus import authors, build_formats, write_formats
from unlearn_tasks.dataset_loader import DATA_DIR_ENV, DataError
from unlearn_tasks.tofu_formats.data import load_split
from unlearn_tasks.tofu_formats.documents import build_docs
from unlearn_tasks.tofu_formats.formats import FORMATS, SPLITS
from unlearn_tasks.tofu_formats.options import ReluOptions


def _docs(fmt, splits, **md):
    opts = {"relu_format": fmt, "relu_splits": splits, "relu_options": FORMATS[fmt].options[0] if FORMATS[fmt].options
            else None, **md}
    return build_docs(ReluOptions.from_metadata(opts))


def test_json_array_json_lines_and_hub_parquet_layouts_give_the_same_records(tmp_path):
    fixture = write_fixture(tmp_path / "json")
    expected = load_split("mcqa", "forget10", data_dir=fixture)  # a JSON array file
    hub = tmp_path / "hub" / "mcqa"
    hub.mkdir(parents=True)
    datasets.Dataset.from_list(expected).to_parquet(str(hub / "forget10-00000-of-00001.parquet"))
    assert load_split("mcqa", "forget10", ("question", "Correct option"), data_dir=tmp_path / "hub") == expected
    assert len(load_split("cloze", "forget10", data_dir=fixture)) == 2  # cloze/forget10_cloze.json


def test_unlearn_data_dir_holds_one_folder_per_hub_id(tmp_path, monkeypatch):
    write_fixture(tmp_path / "Exploration-Lab" / "ReLU")
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert [d["split"] for d in _docs("mcqa", ["forget10"])] == ["forget10", "forget10"]


def test_missing_split_names_the_expected_files(tmp_path):
    write_fixture(tmp_path)
    with pytest.raises(DataError, match=r"split 'forget05'.*mcqa/forget05\.json.*forget05-00000-of-00001\.parquet"):
        load_split("mcqa", "forget05", data_dir=tmp_path)


def test_missing_field_names_the_file_and_the_fields(tmp_path):
    (tmp_path / "mcqa").mkdir()
    (tmp_path / "mcqa" / "forget01.json").write_text(json.dumps({"question": "q", "A": "a"}) + "\n")
    with pytest.raises(DataError, match=r"forget01\.json lacks the column\(s\) \['B', 'C', 'D', 'Correct option'\]"):
        _docs("mcqa", ["forget01"], data_dir=str(tmp_path))


def test_invalid_options_are_refused():
    with pytest.raises(ValueError, match="relu_options must be one of"):
        ReluOptions.from_metadata({"relu_format": "odd_one_out", "relu_splits": ["forget01"], "relu_options": 5})
    with pytest.raises(ValueError, match="relu_mode must be one of"):
        ReluOptions.from_metadata({"relu_format": "cloze", "relu_splits": ["forget01"], "relu_mode": "paper"})


def test_demo_formats_follow_the_demo_corpus(tmp_path):
    corpus = build_corpus(0)
    assert [f["q"] for a in authors(0) for f in _facts(a)] == [r["question"] for r in corpus["full"]]
    formats = build_formats(0)
    for size, n_authors in FORGET_AUTHORS.items():
        forget = formats[("mcqa", f"forget{size}")]
        assert [r["question"] for r in forget] == [r["question"] for r in corpus[f"forget{size}"]]
        assert len(formats[("comprehension", f"forget{size}")]) == n_authors
    assert formats[("mcqa", "forget01")][0] == formats[("mcqa", "forget10")][-6]  # nested splits agree
    root = write_formats(tmp_path)
    for fmt in FORMATS.values():
        for split in fmt.splits:
            assert (root / fmt.config / f"{split}.json").is_file(), (fmt.config, split)
    for name in FORMATS:  # every format builds valid documents (cloze blanks, odd letters, ...) on the demo
        docs = _docs(name, ["forget10", "retain90"], data_dir=str(root))
        assert docs and all(d["prompt"] for d in docs)
        if FORMATS[name].family == "mc":
            assert all(0 <= d["gold"] < 4 and d["options"][d["gold"]] == d["target"] for d in docs)
    assert set(SPLITS) < set(FORMATS["comprehension_qa"].splits)
