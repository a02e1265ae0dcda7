"""The lm-eval task class behind ``waterdrum_ax`` and ``waterdrum_tofu``.

Per document: K sampled generations (lm-eval ``repeats``; the :class:`KeepAllGenerations` filter keeps all K),
per-token log-probabilities of the owner's text (Min-K% baseline) and, for KnowMem, one greedy answer. The
corpus's generations are verified once, in the aggregation, under every owner id.
"""

from __future__ import annotations

import functools
import logging
from copy import deepcopy
from typing import Any

from lm_eval.api.filter import Filter
from lm_eval.api.instance import Instance
from unlearn_tasks.corpus_task import CorpusTask

from harness_ext.lm_eval_compat import ANSWER_LOGPROBS, install_request_types
from unlearn_tasks.prompts import ANSWER_DELIMITER, chat_messages, question_prompt
from unlearn_tasks.waterdrum import aggregate
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


class WaterDrumTask(CorpusTask):
    """WaterDrum on one dataset config. Options come from the task metadata (see :class:`WaterDrumOptions`)."""

    RESULTS_KEY = RESULTS_KEY

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        install_request_types()
        config = {k: v for k, v in (config or {}).items() if k != "class"}
        self.options = WaterDrumOptions.from_metadata(config.get("metadata"))
        config["repeats"] = self.options.generations
        super().__init__(config=config, **kwargs)
        self.encoder = as_encoder(self.options.verify_tokenizer)
        self.vocab_size = int(self.options.verify_vocab_size or self.encoder.vocab_size)
        owners = [int(d["owner"]) for d in self.test_docs() if d["kind"] == "text"]
        self.ids = aggregate.verification_ids(self.options, owners)
        self._names = aggregate.metric_names(self.options)
        self._metric_fn_list = {m: None for m in self._names}
        self._metric_fn_kwargs = {m: {} for m in self._names}
        self._aggregation_list = {m: functools.partial(self._aggregate, m) for m in self._names}
        self._higher_is_better = {m: m not in aggregate.LOWER_IS_BETTER for m in self._names}
        self._cache: tuple[int, dict[str, float]] | None = None
        self._record: dict | None = None

    # ------------------------------------------------------------------ prompts and requests
    def doc_to_text(self, doc: dict, doc_to_text: Any = None) -> str:
        return doc["prompt"] if doc["question"] == "" else question_prompt(doc["question"])

    def doc_to_target(self, doc: dict, doc_to_target: Any = None) -> str:
        return doc["reference"]

    def fewshot_context(self, doc: dict, num_fewshot: int, system_instruction: str | None = None,
                        apply_chat_template: bool = False, fewshot_as_multiturn: bool = False,
                        chat_template: Any = None, gen_prefix: str | None = None) -> str:
        """Ax texts: the raw 50-token prefix (a completion, never chat-formatted). Questions: ``Question: q\\nAnswer:``,
        or with ``--apply_chat_template`` the question as the user turn."""
        if doc["question"] == "":
            return doc["prompt"]
        if not apply_chat_template or chat_template is None:
            prompt = question_prompt(doc["question"])
            return f"{system_instruction}\n\n{prompt}" if system_instruction else prompt
        messages = [{"role": "system", "content": system_instruction}] if system_instruction else []
        messages += chat_messages(doc["question"])
        return chat_template(messages, add_generation_prompt=True)

    def construct_requests(self, doc: dict, ctx: str, **kwargs: Any) -> list[Instance]:
        chat = bool(kwargs.pop("apply_chat_template", False))
        kwargs.pop("chat_template", None)
        task, doc_id, repeats = kwargs.pop("metadata", (self.config.task, None, self.options.generations))
        requests = []
        for idx, kind in enumerate(request_plan(doc, self.options)):
            once = (task, doc_id, 1)
            if kind == SAMPLE:
                args = (ctx, deepcopy(self.config.generation_kwargs))
                requests.append(Instance("generate_until", doc, args, idx, metadata=(task, doc_id, repeats), **kwargs))
            elif kind == LOGPROBS:
                if doc["question"] == "":
                    args = ("", doc["text"])  # the owner's whole text after BOS, as WaterDrum's Min-K%
                else:
                    args = (ctx, ("" if chat else ANSWER_DELIMITER) + doc["reference"].strip())
                requests.append(Instance(ANSWER_LOGPROBS, doc, args, idx, metadata=once, **kwargs))
            elif kind == KNOWMEM:
                gen = {"until": list(KNOWMEM_STOP), "max_gen_toks": self.options.knowmem_max_tokens,
                       "do_sample": False, "temperature": 0.0}
                requests.append(Instance("generate_until", doc, (ctx, gen), idx, metadata=once, **kwargs))
        return requests

    # ------------------------------------------------------------------ scoring
    def process_results(self, doc: dict, results: list) -> dict[str, dict]:
        record = score_document(doc, results, self.options)
        return {m: record for m in self._names}

    def _aggregate(self, metric: str, records: list[dict]) -> float:
        key = id(records[0]) ^ len(records) if records else 0
        if self._cache is None or self._cache[0] != key:
            metrics, self._record = aggregate.compute(records, self.options, self.encoder, self.vocab_size)
            self._record["task"] = self.config.task
            self._cache = (key, metrics)
            log.info("%s: forget strength %.4f, retain strength %.4f (ids %s, tokenizer %s)", self.config.task,
                     metrics.get("forget_strength", float("nan")), metrics.get("retain_strength", float("nan")),
                     self._record["ids"], self._record["verify_tokenizer"])
        return self._cache[1][metric]

    def results_record(self) -> dict | None:
        """The per-item scores ``unlearn waterdrum report`` reads."""
        return self._record
