"""The lm-eval task class behind every ReLU task (``tofu_mcqa``, ``tofu_cloze_forget01``, ...).

Requests: letter formats use lm-eval's own ``multiple_choice`` (one log-likelihood per letter); generation
formats ``generate_until`` (comprehension QA with a per-document token budget); cloze needs the blank's token
count for its length normalisation, so it asks for per-token log-probabilities (``unlearn_answer_logprobs``,
implemented for ``hf`` and ``vllm``) and drops the EOS that request appends.
"""

from __future__ import annotations

from typing import Any

from lm_eval.api.instance import Instance
from lm_eval.api.metrics import mean
from lm_eval.api.task import ConfigurableTask

from harness_ext.lm_eval_compat import ANSWER_LOGPROBS, install_request_types
from unlearn_tasks.relu import aggregate, scoring
from unlearn_tasks.relu.formats import GAP
from unlearn_tasks.relu.options import ReluOptions


class ReluTask(ConfigurableTask):
    """One ReLU format on one split, or on a forget split and its retain split (forget, retain, gap)."""

    def __init__(self, config: dict | None = None, **kwargs: Any) -> None:
        install_request_types()
        config = {k: v for k, v in (config or {}).items() if k != "class"}  # lm-eval's PY_TASK key
        self.options = ReluOptions.from_metadata(config.get("metadata"))
        super().__init__(config=config, **kwargs)
        metric = self.options.fmt.metric
        if self.options.is_pair:
            self._aggregation_list = {
                f"forget_{metric}": aggregate.forget_mean,
                f"retain_{metric}": aggregate.retain_mean,
                GAP: aggregate.forget_retain_gap,
            }
            self._higher_is_better = {f"forget_{metric}": False, f"retain_{metric}": True, GAP: False}
        else:
            self._aggregation_list = {metric: mean}  # lm-eval's mean: standard errors come with it
            self._higher_is_better = {metric: not self.options.splits[0].startswith("forget")}
        self._metric_fn_list = {m: None for m in self._aggregation_list}
        self._metric_fn_kwargs = {m: {} for m in self._aggregation_list}

    def construct_requests(self, doc: dict, ctx: str, **kwargs: Any) -> list[Instance] | Instance:
        family = self.options.fmt.family
        if family == "cloze":
            kwargs.pop("apply_chat_template", None)
            kwargs.pop("chat_template", None)
            return Instance(request_type=ANSWER_LOGPROBS, doc=doc, arguments=(ctx, doc["target"]), idx=0, **kwargs)
        requests = super().construct_requests(doc, ctx, **kwargs)
        if family == "generation" and doc["max_gen_toks"] > 0:
            requests.arguments[1]["max_gen_toks"] = doc["max_gen_toks"]  # the release's per-answer budget
        return requests

    def score(self, doc: dict, results: list) -> float:
        """The document's score from the backend's responses."""
        family, name = self.options.fmt.family, self.options.format
        if family == "mc":
            return scoring.letter_accuracy([ll for ll, _ in results], doc["gold"])
        if family == "cloze":
            return scoring.cloze_probability(results[0]["logprobs"][:-1])  # without the appended EOS
        generation = results[0]
        if name == "comprehension_qa":
            return scoring.rouge_f1_mean(doc["target"], generation)
        return scoring.analogy_recall(doc["target"], generation)

    def process_results(self, doc: dict, results: list) -> dict[str, Any]:
        value = self.score(doc, results)
        if self.options.is_pair:
            return {m: (doc["role"], value) for m in self._aggregation_list}
        return {m: value for m in self._aggregation_list}

