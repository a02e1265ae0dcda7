"""The switches of an RWKU evaluation, read from the task's metadata (YAML ``metadata`` + ``--metadata``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from unlearn_tasks.metadata import MetadataOptions
from unlearn_tasks.settings import param

HUB_ID = "jinzhuoran/RWKU"
SETS = ("forget_level1", "forget_level2", "forget_level3", "neighbor_level1", "neighbor_level2", "mia",
        "utility_fluency")
ROUGE_MODES = ("release", "rouge_score")
#: A text of 1-based positions and ranges: "3", "1-10", "1-10,15".
POSITIONS = re.compile(r"\d+(-\d+)?(,\d+(-\d+)?)*")


@dataclass
class RwkuOptions(MetadataOptions):
    WHERE = "RWKU task"

    rwku_set: str = param(None, "which probe set the task evaluates (set by each task YAML)", choices=SETS,
                          required=True)
    dataset_path: str | None = param(None, "another Hub id in RWKU's layout")
    data_dir: str | None = param(None, "a local copy in the Hub's layout (All/, Target/, README configs, or parquet)")
    rwku_data_dir: str | None = param(None, "wins over data_dir, so another benchmark's copy can live apart")
    rwku_targets: list[str | int] | str | int | None = param(
        None, "targets: names from forget_target (a list, or one name), or 1-based positions / ranges in its order "
        "(\"1-10\", \"1-10,15\", 3); default every target")
    rwku_icu: bool = param(False, "in-context unlearning: the release's instruction before every prompt")
    rwku_rouge: str = param("release", "release: the `rouge` package's ROUGE-L; rouge_score: Google's, unstemmed",
                            choices=ROUGE_MODES)
    rwku_first_line: bool = param(False, "keep only the answer's first line (the release's effective setting: no)")
    rwku_max_tokens: int = param(30, "new tokens per answer (the release's max_new_tokens)", ge=1)
    rwku_mia_k: float = param(0.2, "Min-K% and Min-K%++ fraction (the release reports k = 20%)", gt=0, le=1)
    rwku_fluency_max_tokens: int = param(256, "new tokens per fluency answer (the release's max_new_tokens)", ge=1)
    max_items_per_split: int | None = param(None, "at most this many probes per set (smoke runs)", ge=1)

    def validate(self) -> None:
        self.require([
            (self.rwku_targets is None or bool(self.rwku_targets) and all(self.rwku_targets), "rwku_targets must name at least one target"),
        ])

    @property
    def repo_id(self) -> str:
        return self.dataset_path or HUB_ID

    @property
    def local_dir(self) -> str | None:
        return self.rwku_data_dir or self.data_dir

    def complete(self, metadata: dict[str, Any]) -> None:
        """``rwku_targets`` as a list of texts (a names' commas are kept: "Meghan, Duchess of Sussex" is one name;
        only a text of positions and ranges is split at commas)."""
        value = self.rwku_targets
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            text = str(value).strip()
            value = [p.strip() for p in text.split(",")] if POSITIONS.fullmatch(text.replace(" ", "")) else [text]
        if isinstance(value, list):
            self.rwku_targets = [str(v).strip() for v in value]
