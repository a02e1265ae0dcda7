"""The lm-eval task class behind ``rwku_forget_level1`` ... ``rwku_neighbor_level2`` and ``rwku_mia``: one task per
RWKU set, one request per document (a greedy answer for a probe, per-token log-probabilities for an MIA text)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from harness_ext.instances import new_request
from harness_ext.request_types import ANSWER_LOGPROBS
from harness_ext.task_base import UnlearningTask
from unlearn_tasks.metrics import mia
from unlearn_tasks.rwku.benchmark import BENCHMARK, MIA_ATTACKS
from unlearn_tasks.rwku.fluency import ngram_entropy, words
from unlearn_tasks.rwku.options import RwkuOptions
from unlearn_tasks.rwku.prompts import answer_prefix, mia_text, prediction, user_turn
from unlearn_tasks.rwku.scoring import rouge_l

NAN = float("nan")


def mia_scores(logprobs: list[float], vocab_mean: list[float] | None, vocab_var: list[float] | None, text: str,
               k: float) -> dict[str, float]:
    """One text's four scores as the release reports them (higher = more member-like): mean token log-likelihood
    (LOSS), that divided by the zlib-compressed bytes of the text (zlib), the mean of the lowest ``k`` of the token
    log-probs (Min-K%) and of their z-scores under the model's next-token distribution (Min-K%++)."""
    if not logprobs:
        return {a: NAN for a in MIA_ATTACKS}
    return {
        "loss": -mia.loss_score(logprobs),
        "zlib": -mia.zlib_score(logprobs, text),
        "min_k": -mia.min_k_score(logprobs, k),
        "min_k_plus_plus": -mia.min_k_plus_plus_score(logprobs, vocab_mean, vocab_var, k) if vocab_mean else NAN,
    }


class RwkuTask(UnlearningTask):
    """One RWKU set (options: :class:`RwkuOptions`; the set comes from the task YAML's ``rwku_set``)."""

    RESULTS_KEY = "rwku_per_target"

    def setup(self, config: dict) -> None:
        self.options = RwkuOptions.from_metadata(config.get("metadata"))
        self.per_target: dict[str, dict[str, float]] = {}

    @property
    def is_mia(self) -> bool:
        return self.options.rwku_set == "mia"

    @property
    def is_fluency(self) -> bool:
        return self.options.rwku_set == "utility_fluency"

    def _attack_slugs(self) -> list[str]:
        if self.options.rwku_set != "forget_level3" or not getattr(self, "dataset", None):
            return []
        return sorted({s for s in self.dataset["test"]["type_slug"] if s})

    def metric_names(self) -> list[str]:
        if self.is_mia:
            return ([f"mia_{s}_{a}" for s in ("forget", "retain") for a in MIA_ATTACKS]
                    + [f"mia_{a}_auc" for a in MIA_ATTACKS])
        name = self.options.rwku_set
        return [name] + [f"{name}_{slug}" for slug in self._attack_slugs()]

    def lower_is_better(self) -> set[str]:
        forget = {m for m in self.metric_names() if m.startswith("forget_")}
        return set(BENCHMARK.lower_is_better) | forget

    # ------------------------------------------------------------------ prompts and requests
    def doc_to_text(self, doc: dict, doc_to_text: Any = None) -> str:
        if self.is_mia:
            return mia_text(doc, self.options.rwku_icu)
        return user_turn(doc, self.options.rwku_icu)

    def doc_to_target(self, doc: dict, doc_to_target: Any = None) -> str:
        return doc["answer"]

    def chat_messages(self, doc: dict) -> list[dict[str, str]] | None:
        if self.is_mia:
            return None  # raw text, never chat-formatted
        return [{"role": "user", "content": user_turn(doc, self.options.rwku_icu)}]

    def fewshot_context(self, doc: dict, num_fewshot: int, system_instruction: str | None = None,
                        apply_chat_template: bool = False, fewshot_as_multiturn: bool = False,
                        chat_template: Any = None, gen_prefix: str | None = None) -> str:
        """The user turn through the chat template, then ``Answer:`` (the release appends it after the assistant
        header); without ``--apply_chat_template`` the user turn's text, then ``Answer:``."""
        prompt = super().fewshot_context(doc, num_fewshot, system_instruction, apply_chat_template,
                                         fewshot_as_multiturn, chat_template, gen_prefix)
        return prompt if self.is_mia else prompt + answer_prefix(doc)

    def construct_requests(self, doc: dict, ctx: str, **kwargs: Any) -> list:
        kwargs.pop("apply_chat_template", None)
        kwargs.pop("chat_template", None)
        if self.is_mia:
            args = ("", mia_text(doc, self.options.rwku_icu), {"append_eos": False})
            return [new_request(self, ANSWER_LOGPROBS, doc, args, idx=0, **kwargs)]
        if self.is_fluency:
            gen = {"until": [], "max_gen_toks": self.options.rwku_fluency_max_tokens}
        else:
            gen = {"until": ["\n"] if self.options.rwku_first_line else [],
                   "max_gen_toks": self.options.rwku_max_tokens}
        gen.update(do_sample=False, temperature=0.0)
        return [new_request(self, "generate_until", doc, (ctx, gen), idx=0, **kwargs)]

    # ------------------------------------------------------------------ scoring
    def score_document(self, doc: dict, results: list) -> dict:
        record: dict[str, Any] = {"set": doc["set"], "subject": doc["subject"], "type_slug": doc["type_slug"]}
        if self.is_mia:
            resp = results[0]
            record.update(mia_scores(list(resp["logprobs"]), resp.get("vocab_mean"), resp.get("vocab_var"),
                                     mia_text(doc, self.options.rwku_icu), self.options.rwku_mia_k))
            return record
        if self.is_fluency:  # the raw answer, as the release measures it
            tokens, exact = words(str(results[0]))
            record.update(entropy=ngram_entropy(tokens), punkt=exact)
            return record
        answer = prediction(str(results[0]), self.options.rwku_first_line)
        score = rouge_l(doc["answer"], answer, self.options.rwku_rouge)
        record.update(prediction=answer, rougeL_recall=0.0 if math.isnan(score) else score,
                      unscorable=math.isnan(score))
        return record

    def compute_metrics(self, records: list[dict]) -> dict[str, float]:
        self.run_warnings = []
        if self.is_mia:
            out = compute_mia_metrics(records)
        elif self.is_fluency:
            out = {"utility_fluency": _mean([r["entropy"] for r in records])}
            if not all(r["punkt"] for r in records):
                self.run_warnings.append("NLTK's Punkt data is not installed (nltk.download('punkt_tab')): sentences "
                                         "were split at . ! ? before NLTK's word tokenizer, not by Punkt.")
        else:
            out = compute_probe_metrics(records, self.options.rwku_set)
            bad = sum(r["unscorable"] for r in records)
            if bad:
                self.run_warnings.append(f"{bad} answer(s) hold no sentence for the release's ROUGE (e.g. only "
                                         "dots); the release would stop with an error, they are scored 0 here.")
        self.per_target = per_target_metrics(records, self.is_mia)
        return {m: out.get(m, NAN) for m in self.metric_names()}

    def results_record(self) -> dict | None:
        """Each selected target's own metrics (the single-target setting's numbers, from a batch run)."""
        return self.per_target or None


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else NAN


def compute_probe_metrics(records: list[dict], name: str) -> dict[str, float]:
    """Mean ROUGE-L recall over the set (``name``) and, per attack type, ``name_<type>``."""
    out = {name: _mean([r["rougeL_recall"] for r in records])}
    for slug in sorted({r["type_slug"] for r in records if r["type_slug"]}):
        out[f"{name}_{slug}"] = _mean([r["rougeL_recall"] for r in records if r["type_slug"] == slug])
    return out


def compute_mia_metrics(records: list[dict]) -> dict[str, float]:
    """Per member set the mean of each score (the release's numbers), and per attack the AUROC of forget (label 0)
    vs retain (label 1) over the loss-like (negated) scores (:func:`unlearn_tasks.metrics.mia.mia_auroc`)."""
    out: dict[str, float] = {}
    sets = {"forget": "mia_forget", "retain": "mia_retain"}
    for attack in MIA_ATTACKS:
        values = {s: [r[attack] for r in records if r["set"] == config] for s, config in sets.items()}
        for s in sets:
            out[f"mia_{s}_{attack}"] = _mean(values[s])
        out[f"mia_{attack}_auc"] = mia.mia_auroc([-v for v in values["forget"]], [-v for v in values["retain"]])
    return out


def per_target_metrics(records: list[dict], is_mia: bool) -> dict[str, dict[str, float]]:
    """The same metrics per target (subject)."""
    by_subject: dict[str, list[dict]] = {}
    for r in records:
        by_subject.setdefault(r["subject"], []).append(r)
    if is_mia:
        return {s: compute_mia_metrics(rs) for s, rs in by_subject.items()}
    if "entropy" in records[0]:
        return {s: {"utility_fluency": _mean([r["entropy"] for r in rs]), "n": len(rs)} for s, rs in by_subject.items()}
    return {s: {"rougeL_recall": _mean([r["rougeL_recall"] for r in rs]), "n": len(rs)} for s, rs in by_subject.items()}
