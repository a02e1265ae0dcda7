"""The switches of a LUME evaluation, read from the task's metadata (YAML ``metadata`` + ``--metadata``)."""

from __future__ import annotations

from dataclasses import dataclass

from unlearn_tasks.metadata import MetadataOptions
from unlearn_tasks.settings import param

#: The task's public dataset on the Hub (gated: the organisers hand out access).
HUB_ID = "llmunlearningsemeval2025organization/semeval25-unlearning-dataset-public"
#: The release's sub-tasks, as its ``task`` field names them.
SUBTASKS = ("Task1", "Task2", "Task3")
SETS = ("task1", "task2", "task3", "mia")
SPLITS = ("train", "validation")


@dataclass
class LumeOptions(MetadataOptions):
    WHERE = "LUME task"

    lume_set: str = param(None, "which sub-task (task1 creative, task2 PII, task3 real biographies) or mia the task "
                          "evaluates (set by each task YAML)", choices=SETS, required=True)
    dataset_path: str | None = param(None, "another Hub id in the release's layout")
    data_dir: str | None = param(None, "a local copy: forget.jsonl + retain.jsonl (the GitHub release's data/, the "
                                 "official script's folder) or the Hub's data/<forget|retain>_<split>-*.parquet")
    lume_data_dir: str | None = param(None, "wins over data_dir, so another benchmark's copy can live apart")
    lume_split: str = param("train", "the fold (the data unlearned, or the one for tuning) of the Hub's layout or a "
                            "<fold>/ folder; the GitHub release's data/ holds both folds together",
                            choices=SPLITS)
    lume_mia_dir: str | None = param(None, "the MIA folder (member.jsonl, nonmember.jsonl: id, document); default "
                                     "<data folder>/mia_data")
    lume_max_tokens: int = param(256, "new tokens per greedy answer (the official script's max_new_tokens)", ge=1)
    max_items_per_split: int | None = param(None, "at most this many items per forget / retain (or member / "
                                            "nonmember) set (smoke runs)", ge=1)

    @property
    def repo_id(self) -> str:
        return self.dataset_path or HUB_ID

    @property
    def local_dir(self) -> str | None:
        return self.lume_data_dir or self.data_dir
