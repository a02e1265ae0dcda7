"""The lm-eval task class behind ``muse_news`` / ``muse_books`` and their ``_verbmem`` / ``_knowmem`` /
``_privleak`` parts: one task per corpus whose documents are every evaluation set (so PrivLeak's forget-vs-holdout
AUROC, which spans two sets, is computed in one aggregation), one request per document.
"""

from __future__ import annotations

import logging
from typing import Any

from harness_ext.instances import new_request
from harness_ext.request_types import ANSWER_GRADNORM, ANSWER_LOGPROBS
from harness_ext.task_base import UnlearningTask
from unlearn_tasks.muse import aggregate, reference
from unlearn_tasks.muse.benchmark import BENCHMARK
from unlearn_tasks.muse.options import MuseOptions
from unlearn_tasks.muse.prompts import KNOWMEM_STOP, knowmem_messages, truncate_reference
from unlearn_tasks.muse.scoring import memorization, part_of, score_document
from unlearn_tasks.reference_logs import RESULTS_KEY, model_identity, reference_used

log = logging.getLogger(__name__)


class MuseTask(UnlearningTask):
    """MUSE on one corpus. Options come from the task metadata (see :class:`MuseOptions`)."""

    RESULTS_KEY = RESULTS_KEY

    def setup(self, config: dict) -> None:
        self.options = MuseOptions.from_metadata(config.get("metadata"))
        self.model = model_identity(config.get("metadata"))  # lm-eval puts model_args into the metadata
        self._record: dict | None = None

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        self.reference = self._load_reference()
        self.tokenizer = self._load_tokenizer()

    def metric_names(self) -> list[str]:
        o = self.options
        return aggregate.metric_names(o.parts, o.mia_gradnorm, o.mia_reference, o.gibberish_classifier() is not None)

    def lower_is_better(self) -> set[str]:
        return set(BENCHMARK.lower_is_better)

    # ------------------------------------------------------------------ reference and tokenizer
    def _load_reference(self) -> reference.MuseReference | None:
        if "privleak" not in self.options.parts:
            return None
        given = self.options.reference_for_corpus
        if given is None:
            if self.options.mia_reference:
                reference.check_losses(None, None, self.config.task, self._passage_counts())
            log.warning("%s: no reference given, so privleak is reported as NaN. %s", self.config.task,
                        reference.HOW_TO_MAKE.format(task=self.config.task, Corpus=self.options.corpus.title()))
            return None
        ref = reference.load_reference(given, self.options.corpus, self.model)
        if ref.mia_k is not None and abs(ref.mia_k - self.options.mia_k) > 1e-12:
            log.warning("%s: the reference used mia_k=%s but this run uses %s; Min-K%% AUROCs are not comparable.",
                        self.config.task, ref.mia_k, self.options.mia_k)
        log.info("%s: PrivLeak reference %s: %s", self.config.task, ref.source, ref.mia_auc)
        if self.options.mia_reference:
            reference.check_losses(ref, given, self.config.task, self._passage_counts())
        return ref

    def _passage_counts(self) -> dict[str, int]:
        """PrivLeak passages evaluated, per population (what a reference's per-passage losses must cover)."""
        docs = self.test_docs()
        return {split: sum(d["set"] == f"privleak_{split}" for d in docs) for split in ("forget", "holdout")}

    def reference_used(self) -> dict[str, Any] | None:
        return reference_used(self.options.reference_for_corpus, self.reference and self.reference.source)

    def _load_tokenizer(self):
        """The model's tokenizer, for VerbMem's reference cut to its first ``verbmem_max_tokens`` tokens."""
        if "verbmem" not in self.options.parts:
            return None
        if self.options.tokenizer:
            try:
                from transformers import AutoTokenizer

                return AutoTokenizer.from_pretrained(self.options.tokenizer, **self.options.tokenizer_kwargs)
            except Exception as e:  # any loading failure: fall back to the whole reference, loudly
                log.warning("%s: could not load the tokenizer %r (%s).", self.config.task, self.options.tokenizer, e)
        log.warning("%s: no tokenizer (pass pretrained= or tokenizer= in --metadata from Python), so VerbMem compares "
                    "with the whole true continuation instead of its first %d tokens.", self.config.task,
                    self.options.verbmem_max_tokens)
        return None

    def reference_text(self, doc: dict) -> str:
        if part_of(doc) == "verbmem" and self.tokenizer is not None:
            return truncate_reference(self.tokenizer, doc["reference"], self.options.verbmem_max_tokens)
        return doc["reference"]

    # ------------------------------------------------------------------ prompts and requests
    def doc_to_text(self, doc: dict, doc_to_text: Any = None) -> str:
        return doc["prompt"]

    def doc_to_target(self, doc: dict, doc_to_target: Any = None) -> str:
        return doc["reference"]

    def chat_messages(self, doc: dict) -> list[dict[str, str]] | None:
        """KnowMem: few-shot pairs as chat turns. VerbMem and PrivLeak: raw text, never chat-formatted."""
        if part_of(doc) != "knowmem":
            return None
        return knowmem_messages(doc["question"], list(zip(doc["icl_questions"], doc["icl_answers"], strict=True)))

    def construct_requests(self, doc: dict, ctx: str, **kwargs: Any) -> list:
        kwargs.pop("apply_chat_template", None)
        kwargs.pop("chat_template", None)
        part = part_of(doc)
        if part == "privleak":
            # the passage's own tokens after BOS, no EOS appended: what MUSE scores
            args = ("", doc["text"], {"append_eos": False})
            requests = [new_request(self, ANSWER_LOGPROBS, doc, args, idx=0, **kwargs)]
            if self.options.mia_gradnorm:
                # open-unlearning's MUSE GradNorm: the passage's tokens but the last (its token-wise statistics drop
                # the last labelled token), one backward pass each, in train mode as it does, L2 norms
                options = {"append_eos": False, "drop_eos": True, "train_mode": True, "p": 2}
                requests.append(new_request(self, ANSWER_GRADNORM, doc, ("", doc["text"], options),
                                         idx=1, **kwargs))
            return requests
        if part == "verbmem":
            gen = {"until": [], "max_gen_toks": self.options.verbmem_max_tokens}
        else:
            gen = {"until": list(KNOWMEM_STOP), "max_gen_toks": self.options.knowmem_max_tokens}
        gen.update(do_sample=False, temperature=0.0)
        requests = [new_request(self, "generate_until", doc, (ctx, gen), idx=0, **kwargs)]
        if part == "verbmem":
            # the true continuation teacher-forced after the prompt with a space between, no EOS: open-unlearning's
            # extraction strength / exact memorization input (its MUSE_forget_verbmem, insert_space)
            args = (ctx, " " + doc["reference"], {"append_eos": False})
            requests.append(new_request(self, ANSWER_LOGPROBS, doc, args, idx=1, **kwargs))
        return requests

    # ------------------------------------------------------------------ scoring
    def score_document(self, doc: dict, results: list) -> dict:
        record = score_document(doc, results[0], self.options.mia_k, self.reference_text)
        if len(results) > 1 and isinstance(results[1], dict):
            record.update(memorization(results[1]))
        if len(results) > 1 and isinstance(results[1], float):
            record["mia_gradnorm"] = results[1]
        return record

    def compute_metrics(self, records: list[dict]) -> dict[str, float]:
        ref_auc = self.reference.mia_auc if self.reference is not None else None
        o = self.options
        metrics = aggregate.compute_metrics(records, o.parts, ref_auc, self.reference and self.reference.losses,
                                            o.mia_gradnorm, o.mia_reference)
        classifier = o.gibberish_classifier()
        if classifier and "verbmem" in o.parts:
            from unlearn_tasks.classifier import class_probabilities

            # open-unlearning's MUSE config: the forget VerbMem generations, max_length 512 classifier tokens
            forget = sorted((r for r in records if r["set"] == "verbmem_forget"), key=lambda r: r["index"])
            scores = class_probabilities(classifier, [r["generation"].strip() for r in forget], max_length=512)
            metrics[aggregate.GIBBERISH] = sum(scores) / len(scores) if scores else float("nan")
        if "privleak" in self.options.parts:
            self._record = aggregate.reference_record(
                records, metrics, self.options.corpus,
                {"mia_k": self.options.mia_k, "model": self.model,
                 "reference_file": self.reference.path if self.reference else None})
        return metrics

    def results_record(self) -> dict | None:
        """The AUROCs another run needs to use this one as its PrivLeak reference."""
        return self._record
