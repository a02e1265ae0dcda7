"""The lm-eval task class behind ``lume_task1`` ... ``lume_task3`` and ``lume_mia``: one request per item (a greedy
completion of its ``input``, scored against its ``output``) or per MIA document (per-token log-probabilities).
Importing it registers the ``lume`` group's aggregate scores (:mod:`harness_ext.group_scores`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from harness_ext import group_scores
from harness_ext.instances import new_request
from harness_ext.request_types import ANSWER_LOGPROBS
from harness_ext.task_base import UnlearningTask
from unlearn_tasks.lume.benchmark import BENCHMARK
from unlearn_tasks.lume.options import LumeOptions
from unlearn_tasks.lume.scoring import exact_match, lume_scores, mia_auc, mia_score, regurgitation

NAN = float("nan")
SUBTASK_METRICS = ("forget_regurgitation", "forget_knowledge", "retain_regurgitation", "retain_knowledge")
MIA_METRICS = ("mia_loss_auc", "mia_score", "mia_member_loss", "mia_nonmember_loss")

group_scores.register("lume", lume_scores)


class LumeTask(UnlearningTask):
    """One LUME sub-task (forget and retain items) or the MIA set (options: :class:`LumeOptions`)."""

    def setup(self, config: dict) -> None:
        self.options = LumeOptions.from_metadata(config.get("metadata"))

    @property
    def is_mia(self) -> bool:
        return self.options.lume_set == "mia"

    def metric_names(self) -> list[str]:
        return list(MIA_METRICS if self.is_mia else SUBTASK_METRICS)

    def lower_is_better(self) -> set[str]:
        return set(BENCHMARK.lower_is_better)

    def doc_to_text(self, doc: dict, doc_to_text: Any = None) -> str:
        return doc["document"] if self.is_mia else doc["input"]

    def doc_to_target(self, doc: dict, doc_to_target: Any = None) -> str:
        return doc["output"]

    def chat_messages(self, doc: dict) -> list[dict[str, str]] | None:
        """Raw text (the release prompts the model with the item's input, no template); with
        ``--apply_chat_template`` the input as the user turn. MIA documents are never chat-formatted."""
        return None if self.is_mia else [{"role": "user", "content": doc["input"]}]

    def construct_requests(self, doc: dict, ctx: str, **kwargs: Any) -> list:
        kwargs.pop("apply_chat_template", None)
        kwargs.pop("chat_template", None)
        if self.is_mia:
            # the official script's loss: the document's own tokens, each after the ones before it (the first unscored)
            args = ("", doc["document"], {"append_eos": False, "own_tokens": True})
            return [new_request(self, ANSWER_LOGPROBS, doc, args, idx=0, **kwargs)]
        gen = {"until": [], "max_gen_toks": self.options.lume_max_tokens, "do_sample": False, "temperature": 0.0}
        return [new_request(self, "generate_until", doc, (ctx, gen), idx=0, **kwargs)]

    def score_document(self, doc: dict, results: list) -> dict:
        record: dict[str, Any] = {"set": doc["set"], "kind": doc["kind"]}
        if self.is_mia:
            logprobs = list(results[0]["logprobs"])
            record["loss"] = float(-np.mean(logprobs)) if logprobs else NAN
            return record
        answer = str(results[0])
        scorer = regurgitation if doc["kind"] == "regurgitation" else exact_match
        record.update(answer=answer, score=scorer(doc["output"], answer))
        return record

    def compute_metrics(self, records: list[dict]) -> dict[str, float]:
        return compute_mia_metrics(records) if self.is_mia else compute_subtask_metrics(records)


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else NAN


def compute_subtask_metrics(records: list[dict]) -> dict[str, float]:
    """Per set (forget, retain) the mean regurgitation (ROUGE-L recall) and knowledge (exact match) score."""
    return {f"{s}_{k}": _mean([r["score"] for r in records if r["set"] == s and r["kind"] == k])
            for s in ("forget", "retain") for k in ("regurgitation", "knowledge")}


def compute_mia_metrics(records: list[dict]) -> dict[str, float]:
    """The loss attack's AUC (members = 1), the MIA score ``1 - 2|AUC - 0.5|`` and each set's mean loss."""
    losses = {s: [r["loss"] for r in records if r["set"] == s] for s in ("member", "nonmember")}
    auc = mia_auc(losses["member"], losses["nonmember"])
    return {"mia_loss_auc": auc, "mia_score": mia_score(auc), "mia_member_loss": _mean(losses["member"]),
            "mia_nonmember_loss": _mean(losses["nonmember"])}
