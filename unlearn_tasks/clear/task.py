"""The lm-eval task class behind ``clear_forgetXX_image``, ``clear_real_faces`` and ``clear_real_world``: per
document (one image), a greedy generation (ROUGE-L recall) and image-conditioned per-token answer log-probabilities
(probability, Truth Ratio); corpus metrics (Forget Quality against a gold run, Model Utility, domain summaries) in
the aggregation. Runs on lm-eval's ``hf-multimodal`` (and ``vllm-vlm``) backends.
"""

from __future__ import annotations

import logging
import math
from copy import deepcopy
from typing import Any

from harness_ext.instances import new_request
from harness_ext.request_types import ANSWER_LOGPROBS
from harness_ext.task_base import UnlearningTask
from unlearn_tasks.clear import scoring
from unlearn_tasks.clear.benchmark import BENCHMARK
from unlearn_tasks.clear.documents import IMAGE_PLACEHOLDER, image_prompt
from unlearn_tasks.clear.options import ClearOptions
from unlearn_tasks.prompts import ANSWER_DELIMITER
from unlearn_tasks.reference_logs import ReferenceLogError, is_benchmark, model_identity, pick_record, reference_used
from unlearn_tasks.tofu.aggregate import ReferenceData

log = logging.getLogger(__name__)

#: Direction of every metric: declared with the benchmark (:mod:`unlearn_tasks.clear.benchmark`).
LOWER_IS_BETTER = BENCHMARK.lower_is_better
HOW_TO_MAKE = (
    "Produce one by evaluating the gold model (trained on the matching retain set only) with the same task: "
    "`lm_eval --model hf-multimodal --model_args pretrained=GOLD_MODEL --tasks {task} --output_path REF_DIR`, then "
    "pass `--metadata '{{\"reference\": \"REF_DIR\"}}'`."
)


class ClearTask(UnlearningTask):
    """One CLEAR visual evaluation of a forget size (options: :class:`ClearOptions`)."""

    RESULTS_KEY = "unlearning_reference"
    MULTIMODAL = True

    def setup(self, config: dict) -> None:
        self.options = ClearOptions.from_metadata(config.get("metadata"))
        self.model = model_identity(config.get("metadata"))  # lm-eval puts model_args into the metadata
        self._reference_out: dict | None = None

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        self.MULTIMODAL = True
        self.reference = self._load_reference()

    def metric_names(self) -> list[str]:
        return scoring.metric_names(self.options.parts, self.options.sets)

    def lower_is_better(self) -> set[str]:
        return set(LOWER_IS_BETTER)

    def _load_reference(self):
        if "likelihood" not in self.options.parts or "forget_caption" not in self.options.sets:
            return None
        path = self.options.reference_for_split()
        if not path:
            log.warning("%s: no reference (gold model) run given, so forget_quality is NaN. %s",
                        self.config.task, HOW_TO_MAKE.format(task=self.config.task))
            return None
        split = self.options.forget_split
        found = pick_record(path, lambda r: is_benchmark(r, "clear"), "forget_split", split, label="CLEAR",
                            evaluated_model=self.model,
                            hint=f"Pass the gold model's run of {self.config.task} for {split}.")
        if found is None:
            raise ReferenceLogError(
                f"Reference {path} holds no CLEAR results for {split}; pass the output folder of "
                f"{self.config.task} run on the gold model (trained on the matching retain set)."
            )
        ratios = [float(x) for x in found.record["forget_truth_ratio"]]
        if any(math.isnan(x) for x in ratios):
            raise ReferenceLogError(f"{found.file}: the forget truth ratios contain NaN; re-run the gold evaluation.")
        log.info("%s: reference %s (%d forget items)", self.config.task, found.file, len(ratios))
        return ReferenceData(ratios, split, {}, None, found.record.get("answer_scoring"), f"CLEAR results {found.file}",
                             path=found.file)

    def reference_used(self) -> dict[str, Any] | None:
        return reference_used(self.options.reference_for_split(), self.reference and self.reference.source)

    # ------------------------------------------------------------------ prompts and requests
    def doc_to_text(self, doc: dict, doc_to_text: Any = None) -> str:
        return image_prompt(doc["question"])

    def doc_to_target(self, doc: dict, doc_to_target: Any = None) -> str:
        return doc["answer"]

    def doc_to_image(self, doc: dict, doc_to_image: Any = None) -> list:
        return [doc["image"]]

    def chat_messages(self, doc: dict) -> list[dict[str, str]]:
        """With ``--apply_chat_template``: one user turn, the image placeholder first (the backend's processor
        template puts its own image token there)."""
        return [{"role": "user", "content": IMAGE_PLACEHOLDER + doc["question"].strip()}]

    def construct_requests(self, doc: dict, ctx: str, **kwargs: Any) -> list:
        chat = bool(kwargs.pop("apply_chat_template", False))
        kwargs.pop("chat_template", None)
        visual = {"visual": self.doc_to_image(doc)}
        requests = []
        if "generation" in self.options.parts:
            args = (ctx, deepcopy(self.config.generation_kwargs), visual)
            requests.append(new_request(self, "generate_until", doc, args, idx=0, **kwargs))
        if "likelihood" in self.options.parts:
            delimiter = "" if chat else ANSWER_DELIMITER
            for text in scoring.answer_texts(doc):
                args = (ctx, delimiter + text.strip(), visual)
                requests.append(new_request(self, ANSWER_LOGPROBS, doc, args, idx=len(requests),
                                         **kwargs))
        return requests

    # ------------------------------------------------------------------ scoring
    def score_document(self, doc: dict, results: list) -> dict:
        generation = next((r for r in results if isinstance(r, str)), None)
        responses = [r for r in results if isinstance(r, dict)]
        return scoring.score_document(doc, generation, responses, self.options.answer_scoring,
                                      self.options.truth_ratio_mean)

    def compute_metrics(self, records: list[dict]) -> dict[str, float]:
        metrics = scoring.compute_metrics(records, self.options.mode, self.reference)
        if "likelihood" in self.options.parts and "forget_caption" in self.options.sets:
            self._reference_out = scoring.reference_record(
                records, self.options.forget_split,
                {"mode": self.options.mode, "answer_scoring": self.options.answer_scoring,
                 "truth_ratio_mean": self.options.truth_ratio_mean, "model": self.model,
                 "reference_file": self.reference.path if self.reference else None},
            )
        return metrics

    def results_record(self) -> dict | None:
        """The forget-caption truth ratios another run needs to use this one as its gold reference."""
        return self._reference_out
