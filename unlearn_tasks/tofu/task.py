"""The lm-eval task class behind ``tofu_forget01/05/10``: one task per forget size that issues, per document,
a greedy generation (ROUGE) and per-token answer log-probabilities (probability, Truth Ratio, MIA), and
aggregates every TOFU metric at corpus level, Forget Quality against a reference log included.

lm-eval's group aggregation is only a mean, so metrics spanning several TOFU sets live in one task.
"""

from __future__ import annotations

import logging
from copy import deepcopy
from typing import Any

from harness_ext.generation import mark_ou_attention_mask
from harness_ext.instances import new_request
from harness_ext.request_types import ANSWER_GRADNORM, ANSWER_LOGPROBS
from harness_ext.task_base import UnlearningTask
from unlearn_tasks.generation_check import empty_generation_warning
from unlearn_tasks.prompts import ANSWER_DELIMITER, chat_messages, question_prompt, tofu_generation_prompt
from unlearn_tasks.reference_logs import model_identity, reference_used
from unlearn_tasks.tofu import aggregate, reference
from unlearn_tasks.tofu.benchmark import BENCHMARK
from unlearn_tasks.tofu.options import TofuOptions
from unlearn_tasks.tofu.scoring import GENERATED_SETS, MIA_SETS, answer_texts, question_key, score_document

log = logging.getLogger(__name__)

#: Direction of every metric: declared with the benchmark (:mod:`unlearn_tasks.tofu.benchmark`).
LOWER_IS_BETTER = BENCHMARK.lower_is_better


class TofuTask(UnlearningTask):
    """A TOFU evaluation of one forget split. Options come from the task metadata (see :class:`TofuOptions`)."""

    RESULTS_KEY = "unlearning_reference"

    def setup(self, config: dict) -> None:
        self.options = TofuOptions.from_metadata(config.get("metadata"))
        self.model = model_identity(config.get("metadata"))  # lm-eval puts model_args into the metadata
        self._chat = False
        self._system_instruction: str | None = None
        self._reference_out: dict | None = None

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        #: whether mia_reference_auc is reported (``mia_reference``; unset: whether the reference logs the losses)
        self.reference_mia = self.options.mia_reference is not False
        self.reference = self._load_reference()

    def metric_names(self) -> list[str]:
        return aggregate.metric_names(self.options.parts, self.options.mia_gradnorm,
                                      self.options.gibberish_classifier() is not None, self.reference_mia)

    def lower_is_better(self) -> set[str]:
        return set(LOWER_IS_BETTER)

    def metric_modes(self) -> dict[str, Any]:
        """The options' modes, with the truth-ratio aggregation of every set when one was chosen (absent when
        left at the default, so runs from before the option compare equal)."""
        modes = super().metric_modes()
        modes.pop("truth_ratio_aggregator", None)
        if self.options.truth_ratio_aggregator is not None:
            modes["truth_ratio_aggregator"] = self.options.aggregators()
        return modes

    # ------------------------------------------------------------------ reference
    def _load_reference(self) -> aggregate.ReferenceData | None:
        if "likelihood" not in self.options.parts:
            return None
        path = self.options.reference_for_split()
        if not path:
            log.warning(
                "%s: no reference log given, so forget_quality and privleak are reported as NaN. %s",
                self.config.task,
                reference.HOW_TO_MAKE.format(task=self.config.task),
            )
            return None
        forget_keys = [question_key(d["question"]) for d in self.test_docs() if d["split"] == "forget"]
        ref = reference.load_reference(path, self.options.forget_split, self.options.truth_ratio_mean, self.model,
                                       n_forget=len(forget_keys))
        reference.check_items(ref, forget_keys)
        if ref.answer_scoring and ref.answer_scoring != self.options.answer_scoring:
            log.warning(
                "%s: the reference scored answers with answer_scoring=%r but this run uses %r; truth ratios are not "
                "strictly comparable. Pass --metadata '{\"answer_scoring\": \"%s\"}' to match it.",
                self.config.task, ref.answer_scoring, self.options.answer_scoring, ref.answer_scoring,
            )
        log.info("%s: reference %s", self.config.task, reference.describe(ref))
        if self.reference_mia:
            n_holdout = sum(d["split"] == "holdout" for d in self.test_docs())
            try:
                reference.check_losses(ref, path, self.config.task, n_holdout)
            except reference.ReferenceLogError as e:
                if self.options.mia_reference:  # asked for by name: refused
                    raise
                log.warning("%s mia_reference_auc is left out of this run.", e)
                self.reference_mia = False
        return ref

    def reference_used(self) -> dict[str, Any] | None:
        return reference_used(self.options.reference_for_split(), self.reference and self.reference.source)

    # ------------------------------------------------------------------ prompts and requests
    def doc_to_text(self, doc: dict, doc_to_text: Any = None) -> str:
        return question_prompt(doc["question"])

    def doc_to_target(self, doc: dict, doc_to_target: Any = None) -> str:
        return doc["answer"]

    def chat_messages(self, doc: dict) -> list[dict[str, str]]:
        """With ``--apply_chat_template`` the question is the user turn (else ``Question: q\\nAnswer:``); in the
        ``tofu`` mode as given (open-unlearning does not strip it), else stripped."""
        if self.options.answer_scoring == "tofu":
            return [{"role": "user", "content": doc["question"]}]
        return chat_messages(doc["question"])

    def fewshot_context(self, doc: dict, num_fewshot: int, system_instruction: str | None = None,
                        *args: Any, **kwargs: Any) -> str:
        self._system_instruction = system_instruction  # the system turn of the chat conversations scored
        return super().fewshot_context(doc, num_fewshot, system_instruction, *args, **kwargs)

    def _conversation(self, doc: dict, answer: str) -> list[dict[str, str]]:
        """The chat turns lm-eval rendered for ``doc`` (system instruction, question) and ``answer`` as the
        assistant's: what open-unlearning tokenises in the chat template (:mod:`harness_ext.chat_tokens`)."""
        system = self._system_instruction
        turns = [{"role": "system", "content": system}] if system else []
        return [*turns, *self.chat_messages(doc), {"role": "assistant", "content": answer}]

    def construct_requests(self, doc: dict, ctx: str, **kwargs: Any) -> list:
        chat = bool(kwargs.pop("apply_chat_template", False))
        self._chat = chat
        kwargs.pop("chat_template", None)
        tofu = self.options.answer_scoring == "tofu"  # open-unlearning's tokens and its train-mode switch
        ou_mask = chat and tofu and self.options.ou_chat_mask  # its attention mask (pad-token positions hidden)
        requests = []
        if "generation" in self.options.parts and doc["split"] in GENERATED_SETS:
            gen_ctx = tofu_generation_prompt(ctx) if self.options.generation_prompt == "tofu" and not chat else ctx
            args = (gen_ctx, deepcopy(self.config.generation_kwargs))
            request = new_request(self, "generate_until", doc, args, idx=0, **kwargs)
            requests.append(mark_ou_attention_mask(request) if ou_mask else request)
        if "likelihood" in self.options.parts:
            delimiter = "" if chat else ANSWER_DELIMITER

            def request_args(text: str, options: dict) -> tuple:
                if chat and tofu:  # open-unlearning's chat tokens: the answer as given, the template's end of turn
                    return ctx, text, {**options, "conversation": self._conversation(doc, text), "ou_mask": ou_mask}
                return (ctx, delimiter + text.strip(), options) if options else (ctx, delimiter + text.strip())

            for text in answer_texts(doc):
                requests.append(new_request(self, ANSWER_LOGPROBS, doc, request_args(text, {}),
                                         idx=len(requests), **kwargs))
            if self.options.mia_gradnorm and doc["split"] in MIA_SETS:
                # open-unlearning's token-wise statistics: TOFU's boundary (plain prompt only), the EOS dropped
                options = {"skip_first": tofu and not chat, "drop_eos": tofu, "train_mode": tofu, "p": 2}
                requests.append(new_request(self, ANSWER_GRADNORM, doc, request_args(doc["answer"], options),
                                             idx=len(requests), **kwargs))
        return requests

    # ------------------------------------------------------------------ scoring
    def score_document(self, doc: dict, results: list) -> dict:
        generation = next((r for r in results if isinstance(r, str)), None)
        responses = [r for r in results if isinstance(r, dict)]
        record = score_document(doc, generation, responses, self.options)
        gradnorm = [r for r in results if isinstance(r, float)]
        if gradnorm:
            record["mia_gradnorm"] = gradnorm[0]
        if generation is not None and doc["split"] == "forget" and self.options.gibberish_classifier():
            record["generation"] = generation.strip()  # kept for the classifier, run once over all of them
        return record

    def compute_metrics(self, records: list[dict]) -> dict[str, float]:
        metrics = aggregate.compute_metrics(records, self.reference, self.options.aggregators())
        classifier = self.options.gibberish_classifier()
        if classifier and "generation" in self.options.parts:
            from unlearn_tasks.classifier import class_probabilities

            forget = sorted((r for r in records if r["split"] == "forget" and "generation" in r), key=lambda r: r["index"])
            scores = class_probabilities(classifier, [r["generation"] for r in forget])
            metrics[aggregate.GIBBERISH] = sum(scores) / len(scores) if scores else float("nan")
        self._check_generations(records)
        if not self.reference_mia:
            metrics.pop(aggregate.REFERENCE_MIA, None)
        if "likelihood" in self.options.parts:
            self._reference_out = aggregate.reference_record(
                records, metrics, self.options.forget_split,
                {"answer_scoring": self.options.answer_scoring, "truth_ratio_mean": self.options.truth_ratio_mean,
                 "model": self.model, "reference_file": self.reference.path if self.reference else None},
            )
        return metrics

    def _check_generations(self, records: list[dict]) -> None:
        """Warn (log and results file) when most generations are empty, saying what to change."""
        hint = "" if self.options.generation_prompt == "tofu" or self._chat else (
            "Or generate from TOFU's prompt 'Answer: ' (trailing space): "
            "--metadata '{\"generation_prompt\": \"tofu\"}' (implied by answer_scoring tofu)."
        )
        flags = [r["empty_generation"] for r in records if "empty_generation" in r]
        warning = empty_generation_warning(self.config.task, flags, hint, chat_template_applied=self._chat)
        self.run_warnings = [warning] if warning else []
        if warning:
            log.warning(warning)

    def results_record(self) -> dict | None:
        """The data another run needs to use this one as its reference (see :mod:`unlearn_tasks.tofu.reference`)."""
        return self._reference_out
