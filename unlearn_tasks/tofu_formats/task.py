"""The lm-eval task class behind every ReLU task (``tofu_mcqa``, ``tofu_cloze_forget01``, ...).

Requests: letter formats use lm-eval's own ``multiple_choice`` (one log-likelihood per letter); generation
formats ``generate_until`` (comprehension QA with a per-document token budget); cloze needs the blank's token
count for its length normalisation, so it asks for per-token log-probabilities (``unlearn_answer_logprobs``,
implemented for ``hf`` and ``vllm``) and drops the EOS that request appends.

Parity mode (``relu_mode: parity``) reproduces the release where lm-eval's own requests cannot: the cloze blank is
scored as the release tokenises it (prompt and blank each tokenised on their own, special tokens included, no EOS),
and comprehension QA generates exactly the release's budget with ``unlearn_generate_tokens`` (the model's own
generation config decides whether EOS stops it; special tokens kept in the decoded text).
"""

from __future__ import annotations

from typing import Any

from harness_ext.instances import default_requests, new_request
from harness_ext.lm_eval_metrics import mean
from harness_ext.request_types import ANSWER_LOGPROBS, GENERATE_TOKENS
from harness_ext.task_base import UnlearningTask
from unlearn_tasks.tofu_formats import aggregate, scoring
from unlearn_tasks.tofu_formats.formats import GAP, pair_metric_names
from unlearn_tasks.tofu_formats.options import ReluOptions


class ReluTask(UnlearningTask):
    """One ReLU format on one split, or on a forget split and its retain split (forget, retain, gap).

    Prompts are lm-eval's own (from the YAML templates). A single-split task's metric is lm-eval's ``mean`` (so
    standard errors come with it); a pair task's documents score ``(role, value)`` and aggregate per role."""

    def setup(self, config: dict) -> None:
        self.options = ReluOptions.from_metadata(config.get("metadata"))

    def metric_names(self) -> list[str]:
        return pair_metric_names(self.options.fmt) if self.options.is_pair else [self.options.fmt.metric]

    def lower_is_better(self) -> set[str]:
        if self.options.is_pair:
            return {f"forget_{self.options.fmt.metric}", GAP}
        return {self.options.fmt.metric} if self.options.splits[0].startswith("forget") else set()

    def aggregation(self) -> dict:
        if not self.options.is_pair:
            return {self.options.fmt.metric: mean}
        forget, retain, gap = pair_metric_names(self.options.fmt)
        return {forget: aggregate.forget_mean, retain: aggregate.retain_mean, gap: aggregate.forget_retain_gap}

    def construct_requests(self, doc: dict, ctx: str, **kwargs: Any) -> list | Any:
        family = self.options.fmt.family
        if family == "cloze" or doc["context_ids"]:
            kwargs.pop("apply_chat_template", None)
            kwargs.pop("chat_template", None)
        if family == "cloze":
            args: tuple = (ctx, doc["target"])
            if doc["target_ids"]:  # parity: the release's separate tokenisation, no EOS
                args += ({"context_ids": doc["context_ids"], "continuation_ids": doc["target_ids"], "append_eos": False},)
            return new_request(self, ANSWER_LOGPROBS, doc, args, idx=0, **kwargs)
        if doc["context_ids"]:  # parity comprehension QA: the release's budget, past EOS, special tokens kept
            options = {"max_new_tokens": doc["max_gen_toks"], "context_ids": doc["context_ids"]}
            return new_request(self, GENERATE_TOKENS, doc, (ctx, options), idx=0, **kwargs)
        requests = default_requests(self, doc, ctx, **kwargs)
        if family == "generation" and doc["max_gen_toks"] > 0:
            requests[0].arguments[1]["max_gen_toks"] = doc["max_gen_toks"]  # the release's per-answer budget
        return requests

    def score(self, doc: dict, results: list) -> float:
        """The document's score from the backend's responses."""
        family, name = self.options.fmt.family, self.options.format
        if family == "mc":
            return scoring.letter_accuracy([ll for ll, _ in results], doc["gold"])
        if family == "cloze":
            logprobs = results[0]["logprobs"]
            return scoring.cloze_probability(logprobs if doc["target_ids"] else logprobs[:-1])  # no appended EOS
        generation = results[0]
        if name == "comprehension_qa":
            return scoring.rouge_f1_mean(doc["target"], generation)
        return scoring.analogy_recall(doc["target"], generation)

    def score_document(self, doc: dict, results: list) -> float | tuple[str, float]:
        value = self.score(doc, results)
        return (doc["role"], value) if self.options.is_pair else value

