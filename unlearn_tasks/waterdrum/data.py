"""Read one (config, split) of a WaterDrum dataset through the shared loader's rules (:mod:`unlearn_tasks.data`).

Where the data is looked for, in order:
1. ``waterdrum_data_dir`` or ``data_dir`` (metadata), else ``$UNLEARN_DATA_DIR/<Hub id>/`` (e.g.
   ``$UNLEARN_DATA_DIR/Glow-AI/WaterDrum-Ax/``): a folder laid out like the Hub repository, one sub-folder per
   config holding one file per split: ``<config>/<split>.jsonl`` or ``.json`` (JSON lines or a JSON array), or the
   Hub's own ``<config>/<split>-00000-of-00001.parquet`` (what ``huggingface-cli download Glow-AI/WaterDrum-Ax
   --repo-type dataset --local-dir DIR`` gives). A ``data/`` level above the config folders is also accepted.
2. the Hugging Face Hub (``datasets.load_dataset(repo_id, config)[split]``).
"""

from __future__ import annotations

import os
from pathlib import Path

import datasets

from unlearn_tasks import data

AX_HUB_ID = "Glow-AI/WaterDrum-Ax"
TOFU_HUB_ID = "Glow-AI/WaterDrum-TOFU"
SPLITS = ("full", "retain", "forget", "exact_duplicate", "semantic_duplicate")


def split_files(folder: Path, config: str, split: str) -> list[Path]:
    """The local file(s) of ``config``/``split`` inside a Hub-like folder (empty list if none)."""
    for base in (folder / config, folder / "data" / config):
        if not base.is_dir():
            continue
        found = data.local_config_file(base, split)
        if found is not None:
            return [found]
        parquet = sorted(base.glob(f"{split}-*.parquet")) + sorted(base.glob(f"{split}.parquet"))
        if parquet:
            return parquet
    return []


def load_split(
    repo_id: str,
    config: str,
    split: str,
    required: tuple[str, ...] = (),
    data_dir: str | os.PathLike | None = None,
) -> list[dict]:
    """The records of one split as plain dicts, checked for the ``required`` fields; :class:`DataError` if absent."""
    folder = data.resolve_local_folder(repo_id, data_dir)
    if folder is None:
        table = data.load_from_hub(repo_id, config, splits=[split])
        return data.validate_columns(table, required, f"{repo_id} {config}/{split}").to_list()
    files = split_files(folder, config, split)
    if not files:
        raise data.DataError(
            f"No file for {repo_id} config {config!r}, split {split!r} in {folder}: expected "
            f"{folder / config / (split + '.jsonl')} (JSON lines, one record per line; .json also accepted) or the "
            f"Hub's {folder / config / (split + '-00000-of-00001.parquet')} "
            f"(`huggingface-cli download {repo_id} --repo-type dataset --local-dir {folder}`)."
        )
    if files[0].suffix == ".parquet":
        table = datasets.Dataset.from_parquet([str(f) for f in files])
        return data.validate_columns(table, required, str(files[0])).to_list()
    table = data.load_config(repo_id, files[0].stem, required, data_dir=files[0].parent)
    return table.to_list()
