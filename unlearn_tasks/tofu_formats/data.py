"""Read one (config, split) of ReLU through the shared loader's rules (:mod:`unlearn_tasks.dataset_loader`).

Where the data is looked for, in order:
1. ``relu_data_dir`` or ``data_dir`` (metadata), else ``$UNLEARN_DATA_DIR/Exploration-Lab/ReLU/``: a folder laid
   out like the Hub repository, one sub-folder per config holding one file per split:
   ``<config>/<split>.json`` (JSON lines or a JSON array; what the ReLU release's ``download_from_hf.py`` writes),
   ``<config>/<split>.jsonl``, or the Hub's own ``<config>/<split>-00000-of-00001.parquet`` (what
   ``hf download Exploration-Lab/ReLU --repo-type dataset --local-dir DIR`` gives). A split may also
   carry the config as a suffix (``cloze/forget01_cloze.json``), as the Hub's cloze files do.
2. the Hugging Face Hub (gated: accept the terms and log in; the loader's error says so).
"""

from __future__ import annotations

import os

from unlearn_tasks import dataset_loader
from unlearn_tasks.tofu_formats.formats import HUB_ID


def split_candidates(config: str, split: str) -> list[str]:
    """Names a split may have: ``forget01`` or, as the Hub's cloze files, ``forget01_cloze``."""
    return [split, f"{split}_{config}"]


def load_split(
    config: str,
    split: str,
    required: tuple[str, ...] = (),
    data_dir: str | os.PathLike | None = None,
    repo_id: str = HUB_ID,
) -> list[dict]:
    """The records of one ReLU split as plain dicts, checked for the ``required`` fields."""
    return dataset_loader.load_split(repo_id, config, split_candidates(config, split), required, data_dir)
