"""The switches of a BLUR evaluation, read from the task's metadata (YAML ``metadata`` + ``--metadata``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from unlearn_tasks.metadata import MetadataOptions
from unlearn_tasks.settings import param

HUB_ID = "forgelab/BLUR"
#: the benchmarks BLUR's queries come from
SOURCES = ("rwku", "whp", "wmdp", "tofu")
#: query set -> the variant part of its file name (``<source>_<variant>.json``)
SETS = {"forget": "forget", "retain": "retain", "combined": "paired_forget_retain"}
#: relearning difficulty -> its file (``D_lo`` is one file for every source)
RELEARN_LEVELS = ("hi", "mid", "lo")
#: the sources with their own ``hi`` and ``mid`` relearning sets (the release has none for TOFU, whose only set is
#: the combined queries; ``lo`` serves every source)
RELEARN_SOURCES = ("rwku", "whp", "wmdp")
#: the release's generation prompt and budget
PROMPT = "Answer the following question. Question: {} Answer:"
MAX_NEW_TOKENS = 100


@dataclass
class BlurOptions(MetadataOptions):
    WHERE = "BLUR task"

    blur_source: str = param(None, "the benchmark whose BLUR queries the task evaluates (set by each task YAML)",
                             choices=SOURCES, required=True)
    blur_sets: list[str] = param(["forget", "retain", "combined"], "the query sets the task evaluates (set by each "
                                 "task YAML: the sets the release has for that source)")
    blur_references: str | None = param(None, "the base model's answers: a file (or its folder) written by `unlearn "
                                        "blur-references`; required unless blur_generate_only")
    blur_generate_only: bool = param(False, "only generate answers, no scores (what `unlearn blur-references` runs)")
    blur_max_tokens: int = param(MAX_NEW_TOKENS, "new tokens per answer (the release's max_new_tokens)", ge=1)
    blur_stemmer: bool = param(True, "Porter stemming in ROUGE-L (rouge-score's, as TOFU-style evaluations use)")
    dataset_path: str | None = param(None, "another Hub id in BLUR's layout")
    data_dir: str | None = param(None, "a local copy in the Hub's layout (<source>_<variant>.json files)")
    blur_data_dir: str | None = param(None, "wins over data_dir, so another benchmark's copy can live apart")
    max_items_per_split: int | None = param(None, "at most this many queries per set (smoke runs)", ge=1)

    def validate(self) -> None:
        self.require([
            (bool(self.blur_sets) and all(s in SETS for s in self.blur_sets),
             f"blur_sets must name one or more of {', '.join(SETS)}"),
            (self.blur_generate_only or bool(self.blur_references),
             "blur_references must name the base model's answers (write them with `unlearn blur-references --model "
             "BASE --out DIR`) or set blur_generate_only"),
        ])

    def complete(self, metadata: dict[str, Any]) -> None:
        if isinstance(self.blur_sets, str):
            self.blur_sets = [s.strip() for s in self.blur_sets.split(",") if s.strip()]

    @property
    def repo_id(self) -> str:
        return self.dataset_path or HUB_ID

    @property
    def local_dir(self) -> str | None:
        return self.blur_data_dir or self.data_dir
