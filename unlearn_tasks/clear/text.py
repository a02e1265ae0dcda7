"""CLEAR's text part: its people are TOFU's fictitious authors, and the release scores their question-answer pairs
TOFU-style. ``clear_forgetXX_text`` is therefore the TOFU evaluation of the same forget size, read from
``locuslab/TOFU`` (or ``tofu_data_dir`` / ``$UNLEARN_DATA_DIR/locuslab/TOFU``): ``data_dir`` belongs to the CLEAR
folder when both tasks run as the ``clear_forgetXX`` group.
"""

from __future__ import annotations

from typing import Any

from unlearn_tasks.tofu import documents as tofu_docs


def load_docs(forget_split: str = "forget10", tofu_data_dir: str | None = None, tofu_dataset_path: str | None = None,
              sets: list[str] | None = None, max_items_per_split: int | None = None, **_: Any):
    """lm-eval ``custom_dataset`` entry point: TOFU's documents for ``forget_split``."""
    return tofu_docs.load_docs(forget_split, tofu_dataset_path, tofu_data_dir, sets, max_items_per_split)
