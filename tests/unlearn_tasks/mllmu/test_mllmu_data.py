"""MLLMU-Bench's data: the Hub's layout read from a local folder (data_dir or $UNLEARN_DATA_DIR), one-line errors
for a wrong or partial copy, and the forget percentage choosing the people."""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("PIL")

from unlearn_tasks.dataset_loader import DataError  # noqa: E402
from unlearn_tasks.mllmu.data import load_mllmu  # noqa: E402
from unlearn_tasks.mllmu.documents import build_docs, set_rows  # noqa: E402


def test_every_config_reads_with_its_photos(mllmu_data_dir):
    full = load_mllmu("Full_Set", mllmu_data_dir)
    assert len(full) == 40 and full[0]["image"].size == (16, 16)
    test = load_mllmu("Test_Set", mllmu_data_dir)  # two shards, read in name order
    assert [r["ID"] for r in test] == [r["ID"] for r in full] and len(test[0]["images"]) == 2
    assert len(load_mllmu("Retain_Set", mllmu_data_dir)) == 3


@pytest.mark.parametrize("split,people", [("forget05", 2), ("forget10", 4), ("forget15", 6)])
def test_the_forget_percentage_picks_the_people(mllmu_data_dir, split, people):
    rows, full, never, forget_ids = set_rows(split, mllmu_data_dir)
    assert len(rows["forget"]) == len(rows["test"]) == people
    assert len(rows["retain"]) == 40 - people
    assert {r["ID"] for r in rows["test"]} == set(forget_ids)
    assert len(never) == 40 - 6  # no forget split holds them: the clean few-shot pool


def test_unlearn_data_dir_finds_the_copy(mllmu_data_dir, tmp_path, monkeypatch):
    root = tmp_path / "root"
    (root / "MLLMMU").mkdir(parents=True)
    (root / "MLLMMU" / "MLLMU-Bench").symlink_to(mllmu_data_dir)
    monkeypatch.setenv("UNLEARN_DATA_DIR", str(root))
    assert len(load_mllmu("forget_5")) == 2


def _copy(src, dst, drop=None):
    shutil.copytree(src, dst)
    if drop:
        shutil.rmtree(dst / drop)
    return dst


def test_a_missing_config_is_one_line_naming_it(mllmu_data_dir, tmp_path):
    data = _copy(mllmu_data_dir, tmp_path / "d", drop="Test_Set")
    with pytest.raises(DataError) as e:
        build_docs("forget05", "image", data_dir=data)
    assert "no folder Test_Set/" in str(e.value) and "\n" not in str(e.value)


def test_a_wrong_folder_is_one_line(tmp_path):
    (tmp_path / "x").mkdir()
    with pytest.raises(DataError, match="MLLMU-Bench's layout") as e:
        load_mllmu("Full_Set", tmp_path)
    assert "\n" not in str(e.value)


def test_a_config_without_a_task_column_is_refused(mllmu_data_dir, tmp_path):
    import datasets

    data = _copy(mllmu_data_dir, tmp_path / "d")
    shard = data / "Retain_Set" / "train-00000-of-00001.parquet"
    datasets.Dataset.from_parquet(str(shard)).remove_columns("Mask_Task").to_parquet(str(shard))
    with pytest.raises(DataError, match=r"lacks the column\(s\) \['Mask_Task'\]"):
        load_mllmu("Retain_Set", data)


def test_a_forget_split_from_another_copy_is_refused(mllmu_data_dir, tmp_path):
    import datasets

    data = _copy(mllmu_data_dir, tmp_path / "d")
    shard = data / "forget_5" / "train-00000-of-00001.parquet"
    ds = datasets.Dataset.from_parquet(str(shard))
    ds.map(lambda r: {"ID": "999"}).to_parquet(str(shard))
    with pytest.raises(DataError, match=r"IDs \['999'\] are not in Full_Set"):
        set_rows("forget05", data)


def test_a_shard_that_is_not_parquet(mllmu_data_dir, tmp_path):
    data = _copy(mllmu_data_dir, tmp_path / "d")
    (data / "Full_Set" / "train-00000-of-00001.parquet").write_text("not parquet")
    with pytest.raises(DataError, match="not a readable parquet file"):
        load_mllmu("Full_Set", data)
