"""The lm-eval task class behind ``waterdrum_ax`` and ``waterdrum_tofu``.

Per document: K sampled generations (lm-eval ``repeats``; the :class:`KeepAllGenerations` filter keeps all K),
per-token log-probabilities of the owner's text (Min-K% baseline) and, for KnowMem, one greedy answer. The
corpus's generations are verified once, in the aggregation, under every owner id.
"""

from __future__ import annotations

import logging
from copy import deepcopy
from typing import Any

from lm_eval.api.filter import Filter

from harness_ext.instances import new_request
from harness_ext.request_types import ANSWER_LOGPROBS
from harness_ext.task_base import UnlearningTask
from unlearn_tasks.prompts import ANSWER_DELIMITER, chat_messages, question_prompt
from unlearn_tasks.waterdrum import aggregate
from unlearn_tasks.waterdrum.benchmark import BENCHMARK
from unlearn_tasks.waterdrum.options import WaterDrumOptions
from unlearn_tasks.waterdrum.runs import RESULTS_KEY
from unlearn_tasks.waterdrum.scoring import KNOWMEM, LOGPROBS, SAMPLE, request_plan, score_document
from unlearn_tasks.waterdrum.tokenizer import as_encoder

log = logging.getLogger(__name__)

KNOWMEM_STOP = ["\n\n", "\nQuestion:"]


class KeepAllGenerations(Filter):
    """lm-eval filter that passes every one of the K responses of a request on (``take_first`` keeps one)."""

    def apply(self, resps: Any, docs: list[dict]) -> list:
        return [list(r) for r in resps]


class WaterDrumTask(UnlearningTask):
    """WaterDrum on one dataset config. Options come from the task metadata (see :class:`WaterDrumOptions`)."""

    RESULTS_KEY = RESULTS_KEY

    def setup(self, config: dict) -> None:
        self.options = WaterDrumOptions.from_metadata(config.get("metadata"))
        config["repeats"] = self.options.generations
        self._record: dict | None = None

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        self.encoder = as_encoder(self.options.verify_tokenizer)
        self.vocab_size = int(self.options.verify_vocab_size or self.encoder.vocab_size)
        owners = [int(d["owner"]) for d in self.test_docs() if d["kind"] == "text"]
        self.ids = aggregate.verification_ids(self.options, owners)

    def metric_names(self) -> list[str]:
        return aggregate.metric_names(self.options)

    def lower_is_better(self) -> set[str]:
        return set(BENCHMARK.lower_is_better)

    # ------------------------------------------------------------------ prompts and requests
    def doc_to_text(self, doc: dict, doc_to_text: Any = None) -> str:
        return doc["prompt"] if doc["question"] == "" else question_prompt(doc["question"])

    def doc_to_target(self, doc: dict, doc_to_target: Any = None) -> str:
        return doc["reference"]

    def chat_messages(self, doc: dict) -> list[dict[str, str]] | None:
        """Ax texts: the raw 50-token prefix (a completion, never chat-formatted). Questions: the user turn."""
        return None if doc["question"] == "" else chat_messages(doc["question"])

    def construct_requests(self, doc: dict, ctx: str, **kwargs: Any) -> list:
        chat = bool(kwargs.pop("apply_chat_template", False))
        kwargs.pop("chat_template", None)
        requests = []
        for idx, kind in enumerate(request_plan(doc, self.options)):
            if kind == SAMPLE:
                args = (ctx, deepcopy(self.config.generation_kwargs))
                requests.append(new_request(self, "generate_until", doc, args, idx, **kwargs))  # the K samples
            elif kind == LOGPROBS:
                if doc["question"] == "":
                    args = ("", doc["text"])  # the owner's whole text after BOS, as WaterDrum's Min-K%
                else:
                    args = (ctx, ("" if chat else ANSWER_DELIMITER) + doc["reference"].strip())
                requests.append(new_request(self, ANSWER_LOGPROBS, doc, args, idx, repeats=1, **kwargs))
            elif kind == KNOWMEM:
                gen = {"until": list(KNOWMEM_STOP), "max_gen_toks": self.options.knowmem_max_tokens,
                       "do_sample": False, "temperature": 0.0}
                requests.append(new_request(self, "generate_until", doc, (ctx, gen), idx, repeats=1, **kwargs))
        return requests

    # ------------------------------------------------------------------ scoring
    def score_document(self, doc: dict, results: list) -> dict:
        return score_document(doc, results, self.options)

    def compute_metrics(self, records: list[dict]) -> dict[str, float]:
        metrics, self._record = aggregate.compute(records, self.options, self.encoder, self.vocab_size)
        self._record["task"] = self.config.task
        log.info("%s: forget strength %.4f, retain strength %.4f (ids %s, tokenizer %s)", self.config.task,
                 metrics.get("forget_strength", float("nan")), metrics.get("retain_strength", float("nan")),
                 self._record["ids"], self._record["verify_tokenizer"])
        return metrics

    def results_record(self) -> dict | None:
        """The per-item scores ``unlearn waterdrum report`` reads."""
        return self._record
