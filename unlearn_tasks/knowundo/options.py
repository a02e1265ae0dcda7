"""The switches of a KnowUnDo evaluation, read from the task's metadata (YAML ``metadata`` + ``--metadata``)."""

from __future__ import annotations

from dataclasses import dataclass

from unlearn_tasks.metadata import MetadataOptions
from unlearn_tasks.settings import param

HUB_ID = "zjunlp/KnowUnDo"
DOMAINS = ("copyright", "privacy")
#: the two scopes of a domain (the Hub's splits)
SCOPES = ("unlearn", "retention")
#: each scope's record holds a ``train`` and a ``val`` list; the release evaluates ``val``
PARTS = ("val", "train")


@dataclass
class KnowundoOptions(MetadataOptions):
    WHERE = "KnowUnDo task"

    knowundo_domain: str = param(None, "which domain the task evaluates (set by each task YAML)", choices=DOMAINS,
                                 required=True)
    dataset_path: str | None = param(None, "another Hub id in KnowUnDo's layout")
    data_dir: str | None = param(None, "a local copy in the Hub's layout (<domain>/<scope>.json, or parquet)")
    knowundo_data_dir: str | None = param(None, "wins over data_dir, so another benchmark's copy can live apart")
    knowundo_part: str = param("val", "the list of each scope's record to evaluate (the release evaluates val)",
                               choices=PARTS)
    knowundo_direct_prompt: bool = param(True, "the release's domain instruction before each request (its "
                                         "evaluation script sets --direct_prompt=True)")
    max_items_per_split: int | None = param(None, "at most this many requests per scope (smoke runs)", ge=1)

    @property
    def repo_id(self) -> str:
        return self.dataset_path or HUB_ID

    @property
    def local_dir(self) -> str | None:
        return self.knowundo_data_dir or self.data_dir
