"""Read one (config, split) of a WaterDrum dataset through the shared loader's rules (:mod:`unlearn_tasks.dataset_loader`).

Where the data is looked for, in order:
1. ``waterdrum_data_dir`` or ``data_dir`` (metadata), else ``$UNLEARN_DATA_DIR/<Hub id>/`` (e.g.
   ``$UNLEARN_DATA_DIR/Glow-AI/WaterDrum-Ax/``): a folder laid out like the Hub repository, one sub-folder per
   config holding one file per split: ``<config>/<split>.jsonl`` or ``.json`` (JSON lines or a JSON array), or the
   Hub's own ``<config>/<split>-00000-of-00001.parquet`` (what ``hf download Glow-AI/WaterDrum-Ax
   --repo-type dataset --local-dir DIR`` gives). A ``data/`` level above the config folders is also accepted.
2. the Hugging Face Hub (``datasets.load_dataset(repo_id, config)[split]``).
"""

from __future__ import annotations

import os

from unlearn_tasks import dataset_loader

AX_HUB_ID = "Glow-AI/WaterDrum-Ax"
TOFU_HUB_ID = "Glow-AI/WaterDrum-TOFU"
SPLITS = ("full", "retain", "forget", "exact_duplicate", "semantic_duplicate")


def load_split(
    repo_id: str,
    config: str,
    split: str,
    required: tuple[str, ...] = (),
    data_dir: str | os.PathLike | None = None,
) -> list[dict]:
    """The records of one split as plain dicts, checked for the ``required`` fields; :class:`DataError` if absent."""
    return dataset_loader.load_split(repo_id, config, [split], required, data_dir)
