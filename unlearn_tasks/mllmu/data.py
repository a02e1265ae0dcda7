"""MLLMU-Bench configs as records with PIL images, from the Hub (``MLLMMU/MLLMU-Bench``, read at run time, never
shipped) or a local copy in the Hub's layout (``data_dir`` or ``$UNLEARN_DATA_DIR/MLLMMU/MLLMU-Bench/``): one folder
per config holding its parquet shards ``<config>/train-*.parquet`` (what ``hf download MLLMMU/MLLMU-Bench
--repo-type dataset --local-dir DIR`` gives; images as an HF ``Image`` column, ``Test_Set``'s as a list of them).
"""

from __future__ import annotations

import os
from typing import Any

from unlearn_tasks.clear.data import decode_image
from unlearn_tasks.dataset_loader import DataError, load_split, resolve_local_folder
from unlearn_tasks.mllmu.splits import HUB_ID, TEST_SET

TASK_COLUMNS = ("Classification_Task", "Mask_Task", "Generation_Task")


def required_columns(config: str) -> tuple[str, ...]:
    return ("ID", "images" if config == TEST_SET else "image", *TASK_COLUMNS)


def load_mllmu(config: str, data_dir: str | os.PathLike | None = None, dataset_path: str = HUB_ID) -> list[dict]:
    """Records of one config (split ``train``), ``image`` (or ``Test_Set``'s ``images``) decoded to PIL."""
    folder = resolve_local_folder(dataset_path, data_dir)
    if folder is not None and not (folder / config).is_dir() and not (folder / "data" / config).is_dir():
        have = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
        raise DataError(f"{folder} has no folder {config}/ (MLLMU-Bench's layout: Full_Set/, Retain_Set/, Test_Set/, "
                        f"forget_5/, retain_95/, ... each with train-*.parquet; found {have[:8]}).")
    records = load_split(dataset_path, config, ["train"], required_columns(config), data_dir, prefer_parquet=True)
    where = f"{dataset_path} {config}" if folder is None else str(folder / config)
    for n, r in enumerate(records):
        r["ID"] = str(r["ID"])
        if config == TEST_SET:
            images = r.get("images") or []
            r["images"] = [decode_image(v, None, f"{where} row {n} ({r['ID']})") for v in images]
            if not r["images"]:
                raise DataError(f"{where}: row {n} ({r['ID']}) has no photo in 'images'.")
        else:
            r["image"] = decode_image(r.get("image"), None, f"{where} row {n} ({r['ID']})")
            if r["image"] is None:
                raise DataError(f"{where}: row {n} ({r['ID']}) has no image.")
        _check_tasks(r, f"{where} row {n} ({r['ID']})")
    return records


def _check_tasks(row: dict[str, Any], where: str) -> None:
    """Each task column has the release's shape; a missing field is a one-line :class:`DataError`."""
    cls = row["Classification_Task"]
    if not isinstance(cls, dict):
        raise DataError(f"{where}: Classification_Task is not a struct of Image_Textual_Questions / "
                        "Pure_Text_Questions.")
    for kind in ("Image_Textual_Questions", "Pure_Text_Questions"):
        for q in cls.get(kind) or []:
            if not isinstance(q, dict) or not all(q.get(k) for k in ("Question", "Options", "Correct_Answer")):
                raise DataError(f"{where}: a {kind} entry lacks Question, Options or Correct_Answer ({q!r:.120}).")
    for column in ("Mask_Task", "Generation_Task"):
        for q in row[column] or []:
            if not isinstance(q, dict) or not all(isinstance(q.get(k), str) for k in ("Question", "Ground_Truth",
                                                                                     "Type")):
                raise DataError(f"{where}: a {column} entry lacks Question, Ground_Truth or Type ({q!r:.120}).")
