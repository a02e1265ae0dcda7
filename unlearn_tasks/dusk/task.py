"""The lm-eval task class behind ``dusk_verbatim``, ``dusk_forget_qa``, ``dusk_shared_qa``, ``dusk_retain_qa`` and
``dusk_privacy``: one task per measure, one request per document (a greedy continuation or answer, or per-token
log-probabilities of a membership-inference passage)."""

from __future__ import annotations

import logging
from typing import Any

from harness_ext.instances import new_request
from harness_ext.request_types import ANSWER_LOGPROBS
from harness_ext.task_base import UnlearningTask
from unlearn_tasks.dusk import scoring
from unlearn_tasks.dusk.benchmark import BENCHMARK
from unlearn_tasks.dusk.options import DuskOptions
from unlearn_tasks.dusk.reference import HOW_TO_MAKE, DuskReference, load_reference, reference_record
from unlearn_tasks.muse.prompts import KNOWMEM_STOP, knowmem_messages, truncate_reference
from unlearn_tasks.reference_logs import RESULTS_KEY, model_identity, reference_used

log = logging.getLogger(__name__)


class DuskTask(UnlearningTask):
    """One DUSK measure (options: :class:`DuskOptions`; the measure comes from the task YAML's ``dusk_set``)."""

    RESULTS_KEY = RESULTS_KEY

    def setup(self, config: dict) -> None:
        self.options = DuskOptions.from_metadata(config.get("metadata"))
        self.model = model_identity(config.get("metadata"))  # lm-eval puts model_args into the metadata
        self._record: dict | None = None

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        self.reference = self._load_reference()
        self.tokenizer = None
        if self.options.dusk_set == "verbatim":
            from unlearn_tasks.dusk.data import load_tokenizer

            self.tokenizer = load_tokenizer(self.options)
            if self.tokenizer is None:
                log.warning("%s: no tokenizer (pass pretrained= or tokenizer= in --metadata from Python), so the "
                            "continuation is compared with the whole reference instead of its first %d tokens.",
                            self.config.task, self.options.dusk_verbatim_max_tokens)

    @property
    def is_privacy(self) -> bool:
        return self.options.dusk_set == "privacy"

    def _load_reference(self) -> DuskReference | None:
        if not self.is_privacy:
            return None
        if self.options.dusk_reference is None:
            log.warning("%s: no dusk_reference given, so privleak and retain_deviation are reported as NaN. %s",
                        self.config.task, HOW_TO_MAKE)
            return None
        ref = load_reference(self.options.dusk_reference, self.model)
        log.info("%s: reference %s: %s", self.config.task, ref.source, ref.auc)
        return ref

    def reference_used(self) -> dict[str, Any] | None:
        return reference_used(self.options.dusk_reference, self.reference and self.reference.source)

    def metric_names(self) -> list[str]:
        return scoring.metric_names(self.options.dusk_set)

    def lower_is_better(self) -> set[str]:
        return set(BENCHMARK.lower_is_better)

    # ------------------------------------------------------------------ prompts and requests
    def doc_to_text(self, doc: dict, doc_to_text: Any = None) -> str:
        return doc["prompt"]

    def doc_to_target(self, doc: dict, doc_to_target: Any = None) -> str:
        return doc["reference"]

    def chat_messages(self, doc: dict) -> list[dict[str, str]] | None:
        """QA: the few-shot pairs as chat turns (with --apply_chat_template). Verbatim and privacy: raw text."""
        if doc["set"] not in scoring.PREFIX or doc["set"] == "verbatim":
            return None
        return knowmem_messages(doc["question"], list(zip(doc["icl_questions"], doc["icl_answers"], strict=True)))

    def construct_requests(self, doc: dict, ctx: str, **kwargs: Any) -> list:
        kwargs.pop("apply_chat_template", None)
        kwargs.pop("chat_template", None)
        if self.is_privacy:  # the passage's own tokens after BOS, no EOS appended: what the release scores
            args = ("", doc["text"], {"append_eos": False})
            return [new_request(self, ANSWER_LOGPROBS, doc, args, idx=0, **kwargs)]
        if doc["set"] == "verbatim":
            gen = {"until": [], "max_gen_toks": self.options.dusk_verbatim_max_tokens}
        else:
            gen = {"until": list(KNOWMEM_STOP), "max_gen_toks": self.options.dusk_qa_max_tokens}
        gen.update(do_sample=False, temperature=0.0)
        return [new_request(self, "generate_until", doc, (ctx, gen), idx=0, **kwargs)]

    # ------------------------------------------------------------------ scoring
    def reference_text(self, doc: dict) -> str:
        """The verbatim reference cut to its first ``dusk_verbatim_max_tokens`` tokens (the release's); QA: the answer."""
        if doc["set"] == "verbatim" and self.tokenizer is not None:
            return truncate_reference(self.tokenizer, doc["reference"], self.options.dusk_verbatim_max_tokens)
        return doc["reference"]

    def score_document(self, doc: dict, results: list) -> dict:
        record: dict[str, Any] = {"set": doc["set"], "index": doc["index"]}
        if self.is_privacy:
            resp = results[0]
            lps = list(resp["logprobs"])
            mean, var = resp.get("vocab_mean"), resp.get("vocab_var")
            record["min_k_plus_plus"] = (scoring.min_k_plus_plus(lps, mean, var, self.options.dusk_mia_k)
                                         if mean is not None else scoring.NAN)
            return record
        record.update(scoring.generation_record(doc["set"], self.reference_text(doc), str(results[0])))
        return record

    def compute_metrics(self, records: list[dict]) -> dict[str, float]:
        metrics = scoring.compute_metrics(self.options.dusk_set, records, self.reference and self.reference.auc)
        if self.is_privacy:
            counts = {s: sum(r["set"] == f"privacy_{s}" for r in records) for s in ("forget", "retain", "holdout")}
            self._record = reference_record(metrics, self.model, counts, self.options.dusk_mia_k,
                                            self.options.dusk_mia_window)
            if self.reference is not None:
                self._record["reference_file"] = self.reference.path
        return metrics

    def results_record(self) -> dict | None:
        """The AUROCs another run needs to use this one as its reference."""
        return self._record
