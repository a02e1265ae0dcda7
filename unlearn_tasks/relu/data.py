"""Read one (config, split) of ReLU through the shared loader's rules (:mod:`unlearn_tasks.data`).

Where the data is looked for, in order:
1. ``relu_data_dir`` or ``data_dir`` (metadata), else ``$UNLEARN_DATA_DIR/Exploration-Lab/ReLU/``: a folder laid
   out like the Hub repository, one sub-folder per config holding one file per split:
   ``<config>/<split>.json`` (JSON lines or a JSON array; what the ReLU release's ``download_from_hf.py`` writes),
   ``<config>/<split>.jsonl``, or the Hub's own ``<config>/<split>-00000-of-00001.parquet`` (what
   ``huggingface-cli download Exploration-Lab/ReLU --repo-type dataset --local-dir DIR`` gives). A split may also
   carry the config as a suffix (``cloze/forget01_cloze.json``), as the Hub's cloze files do.
2. the Hugging Face Hub (gated: accept the terms and log in; the loader's error says so).
"""

from __future__ import annotations

import os
from pathlib import Path

import datasets

from unlearn_tasks import data
from unlearn_tasks.relu.formats import HUB_ID


def split_candidates(config: str, split: str) -> list[str]:
    """Names a split may have: ``forget01`` or, as the Hub's cloze files, ``forget01_cloze``."""
    return [split, f"{split}_{config}"]


def _local_file(folder: Path, config: str, split: str) -> list[Path]:
    for name in split_candidates(config, split):
        for base in (folder / config, folder / "data" / config):
            found = data.local_config_file(base, name) if base.is_dir() else None
            if found is not None:
                return [found]
            parquet = sorted(base.glob(f"{name}-*.parquet")) + sorted(base.glob(f"{name}.parquet"))
            if parquet:
                return parquet
    return []


def _from_hub(repo_id: str, config: str, split: str) -> datasets.Dataset:
    return data.load_from_hub(repo_id, config, splits=split_candidates(config, split))


def load_split(
    config: str,
    split: str,
    required: tuple[str, ...] = (),
    data_dir: str | os.PathLike | None = None,
    repo_id: str = HUB_ID,
) -> list[dict]:
    """The records of one ReLU split as plain dicts, checked for the ``required`` fields."""
    folder = data.resolve_local_folder(repo_id, data_dir)
    if folder is None:
        return data.validate_columns(_from_hub(repo_id, config, split), required, f"{repo_id} {config}/{split}").to_list()
    files = _local_file(folder, config, split)
    if not files:
        raise data.DataError(
            f"No file for {repo_id} config {config!r}, split {split!r} in {folder}: expected "
            f"{folder / config / (split + '.json')} (JSON lines or a JSON array) or the Hub's "
            f"{folder / config / (split + '-00000-of-00001.parquet')} "
            f"(`huggingface-cli download {repo_id} --repo-type dataset --local-dir {folder}`)."
        )
    if files[0].suffix == ".parquet":
        table = datasets.Dataset.from_parquet([str(f) for f in files])
        return data.validate_columns(table, required, str(files[0])).to_list()
    table = data.load_config(repo_id, files[0].stem, required, data_dir=files[0].parent)
    return table.to_list()
