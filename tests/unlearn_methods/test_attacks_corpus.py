"""The relearning attack's related corpus (``--relearn-data``): every accepted format gives the same records; bad
input is refused with the file and the missing column named."""

from __future__ import annotations

import csv
import json

import pytest

from unlearn_methods.attacks.corpus import read_corpus
from unlearn_tasks.dataset_loader import DataError

TEXTS = ["Talia Greyling grew up by the sea.", "Readers of Talia Greyling often mention her harbour stories."]
QA = [{"question": "Where did Talia Greyling grow up?", "answer": "By the sea."},
      {"question": "What do readers of Talia Greyling mention?", "answer": "Her harbour stories."}]


def _write(path, rows):
    suffix = path.suffix
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif suffix == ".json":
        path.write_text(json.dumps(rows))
    elif suffix == ".csv":
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    elif suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
    else:  # a datasets folder
        import datasets

        datasets.Dataset.from_list(rows).save_to_disk(str(path))
    return path


@pytest.mark.parametrize("name", ["c.jsonl", "c.json", "c.csv", "c.parquet", "c_dataset"])
def test_every_format_reads_text_and_qa_rows(tmp_path, name):
    text = read_corpus(_write(tmp_path / f"text_{name}", [{"text": t, "source": "blog"} for t in TEXTS]))
    assert text.kind == "text" and text.records == [{"text": t} for t in TEXTS]
    qa = read_corpus(_write(tmp_path / f"qa_{name}", [dict(r, text="ignored") for r in QA]))
    assert qa.kind == "qa" and qa.records == QA  # both present: formatted like the forget set
    described = qa.describe()
    assert described["rows"] == 2 and described["columns"] == ["question", "answer"] and len(described["sha256"]) == 64
    expected = {"c.jsonl": "jsonl", "c.json": "jsonl", "c.csv": "csv", "c.parquet": "parquet", "c_dataset": "datasets"}
    assert described["format"] == expected[name]


def test_datasets_folder_with_a_train_split(tmp_path):
    import datasets

    datasets.DatasetDict({"train": datasets.Dataset.from_list([{"text": t} for t in TEXTS]),
                          "test": datasets.Dataset.from_list([{"text": "x"}])}).save_to_disk(str(tmp_path / "dd"))
    assert read_corpus(tmp_path / "dd").records == [{"text": t} for t in TEXTS]


def test_missing_column_names_the_file_and_the_column(tmp_path):
    path = _write(tmp_path / "c.csv", [{"passage": t} for t in TEXTS])
    with pytest.raises(DataError, match=r"c\.csv lacks the column 'text' \(or the columns 'question' and 'answer'\); "
                       r"it has the columns \['passage'\]"):
        read_corpus(path)
    path = _write(tmp_path / "q.jsonl", [{"question": r["question"]} for r in QA])
    with pytest.raises(DataError, match=r"q\.jsonl lacks the column 'text' \(or 'question' and 'answer': it has "
                       r"question alone\)"):
        read_corpus(path)


def test_bad_rows_and_files(tmp_path):
    with pytest.raises(DataError, match=r"e\.jsonl: row 2 has an empty or non-text 'text'"):
        read_corpus(_write(tmp_path / "e.jsonl", [{"text": "fine"}, {"text": "  "}]))
    (tmp_path / "broken.jsonl").write_text('{"text": "a"}\n{"text": \n')
    with pytest.raises(DataError, match=r"broken\.jsonl: line 2 is not valid JSON"):
        read_corpus(tmp_path / "broken.jsonl")
    (tmp_path / "c.txt").write_text("hello")
    with pytest.raises(DataError, match=r"c\.txt: unknown file type '\.txt'; give a \.jsonl"):
        read_corpus(tmp_path / "c.txt")
    with pytest.raises(DataError, match=r"--relearn-data .*nowhere\.jsonl: no such file or folder"):
        read_corpus(tmp_path / "nowhere.jsonl")
    (tmp_path / "folder").mkdir()
    with pytest.raises(DataError, match="is a folder but not a Hugging Face datasets folder"):
        read_corpus(tmp_path / "folder")
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(DataError, match=r"empty\.jsonl holds no rows"):
        read_corpus(tmp_path / "empty.jsonl")
