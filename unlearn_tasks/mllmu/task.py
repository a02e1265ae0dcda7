"""The lm-eval task class behind ``mllmu_forgetXX_image`` / ``_text``: one greedy generation per question (the
release's prompt, few-shot included, with its photos), read and scored as the release does; per-set means in the
aggregation. Runs on lm-eval's ``hf-multimodal`` (and ``vllm-vlm``) backends; the text tasks on any backend.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any

from harness_ext.instances import new_request
from harness_ext.task_base import UnlearningTask
from unlearn_tasks.mllmu import scoring
from unlearn_tasks.mllmu.benchmark import BENCHMARK
from unlearn_tasks.mllmu.documents import build_docs
from unlearn_tasks.mllmu.options import MllmuOptions


class MllmuTask(UnlearningTask):
    """One MLLMU-Bench forget size in one mode (options: :class:`MllmuOptions`)."""

    RESULTS_KEY = "unlearning_mllmu"

    def setup(self, config: dict) -> None:
        self.options = MllmuOptions.from_metadata(config.get("metadata"))
        self.images: dict[str, Any] = {}
        self.MULTIMODAL = self.options.modality == "image"

    def download(self, dataset_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """The documents, and the photos in one store that :meth:`doc_to_image` reads by key."""
        import datasets

        o = self.options
        docs, self.images = build_docs(o.forget_split, o.modality, o.dataset_path, o.data_dir, o.sets, o.parts, o.mode,
                                       o.seed, o.classification_shots, o.cloze_shots, o.max_items_per_split)
        self.dataset = datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})

    def metric_names(self) -> list[str]:
        return scoring.metric_names(self.options.parts, self.options.sets)

    def lower_is_better(self) -> set[str]:
        return set(BENCHMARK.lower_is_better)

    def doc_to_text(self, doc: dict, doc_to_text: Any = None) -> str:
        return doc["prompt"]

    def doc_to_target(self, doc: dict, doc_to_target: Any = None) -> str:
        return doc["answer"]

    def doc_to_image(self, doc: dict, doc_to_image: Any = None) -> list:
        return [self.images[k] for k in doc["images"]]

    def chat_messages(self, doc: dict) -> None:
        """The release's prompt is its own chat frame (``USER: ... ASSISTANT:``): never chat-templated."""
        return None

    def construct_requests(self, doc: dict, ctx: str, **kwargs: Any) -> list:
        args: tuple = (ctx, deepcopy(self.config.generation_kwargs))
        if self.MULTIMODAL:
            args = (*args, {"visual": self.doc_to_image(doc)})
        return [new_request(self, "generate_until", doc, args, idx=0, **kwargs)]

    def score_document(self, doc: dict, results: list) -> dict:
        return scoring.score_document(doc, results[0])

    def compute_metrics(self, records: list[dict]) -> dict[str, float]:
        return scoring.compute_metrics(records, self.options.parts, self.options.sets, self.options.mode)
