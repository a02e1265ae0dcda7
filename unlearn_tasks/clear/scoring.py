"""Per-item CLEAR scoring (one document's outputs -> a record of numbers) and the corpus metrics from the records.

Per set (see :mod:`unlearn_tasks.clear.documents`): ``<set>_rougeL_recall`` (greedy generation vs the answer),
``<set>_prob`` (captions: ``p(answer)``; names and options: ``p(answer) / (p(answer) + sum p(perturbed))``) and
``<set>_truth_ratio`` (forget sets ``mean(min(R, 1/R))``, the others ``mean(max(0, 1 - R))``). Corpus metrics:
``forget_quality`` (KS p-value of the forget-caption truth ratios vs the gold model's), ``model_utility`` (harmonic
mean of the 12 non-forget numbers), and the domain summaries ``real_score``, ``retain_score``, ``forget_score``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from unlearn_tasks.clear.documents import CAPTION_SETS, SETS
from unlearn_tasks.metrics.clear import domain_score, release_truth_ratios
from unlearn_tasks.metrics.rouge import rouge_l_recall
from unlearn_tasks.metrics.tofu import (
    forget_quality,
    mean_logprob,
    model_utility,
    option_normalised_prob,
    truth_ratio,
    truth_ratio_forget_stat,
    truth_ratio_retain_stat,
)
from unlearn_tasks.tofu.aggregate import ReferenceData
from unlearn_tasks.tofu.scoring import scored_tokens

NAN = float("nan")
METRICS = ("prob", "rougeL_recall", "truth_ratio")
FORGET_SETS = ("forget_caption", "forget_facerec")
RETAIN_SETS = ("retain_caption", "retain_facerec")
REAL_SETS = ("real_faces", "real_world")
#: What a CLEAR task writes into the results file for another run to use as its reference.
REFERENCE_FORMAT = "lm-eval-unlearning/clear-reference/1"


def answer_texts(doc: dict) -> list[str]:
    """The answers scored for a document, in request order: answer, [paraphrased (captions only)], perturbed..."""
    texts = [doc["answer"]]
    if doc["split"] in CAPTION_SETS:
        texts.append(doc["paraphrased"])
    return texts + list(doc["perturbed"])


def score_document(doc: dict, generation: str | None, responses: list[dict], answer_scoring: str,
                   truth_ratio_mean: str) -> dict[str, Any]:
    """The record of one document: ROUGE, probability, per-item truth ratio and the mean log-probs behind them."""
    split = doc["split"]
    record: dict[str, Any] = {"split": split, "index": doc["index"]}
    record["rougeL_recall"] = rouge_l_recall(doc["answer"], generation) if generation is not None else NAN
    if not responses:
        return record
    lps = [mean_logprob(scored_tokens(r, answer_scoring)) for r in responses]
    answer_lp = lps[0]
    para_lp, pert_lps = (lps[1], lps[2:]) if split in CAPTION_SETS else (lps[0], lps[1:])
    record["answer_mean_logprob"] = answer_lp
    record["paraphrased_mean_logprob"] = para_lp
    record["perturbed_mean_logprobs"] = pert_lps
    if split in CAPTION_SETS:
        record["prob"] = math.exp(answer_lp)
    else:
        record["prob"] = option_normalised_prob(math.exp(answer_lp), [math.exp(v) for v in pert_lps])
    record["truth_ratio"] = truth_ratio(para_lp, pert_lps, truth_ratio_mean)
    return record


def _split_values(records: list[dict], split: str, key: str) -> list:
    rows = sorted((r for r in records if r["split"] == split and key in r), key=lambda r: r["index"])
    return [r[key] for r in rows]


def set_truth_ratios(records: list[dict], split: str, mode: str) -> list[float]:
    """Per-item truth ratios of a set in item order: each item's own (default) or the release's pooled form."""
    if mode == "parity":
        return release_truth_ratios(_split_values(records, split, "paraphrased_mean_logprob"),
                                    _split_values(records, split, "perturbed_mean_logprobs"))
    return _split_values(records, split, "truth_ratio")


def metric_names(parts: list[str], sets: list[str]) -> list[str]:
    names = []
    for s in sets:
        if "generation" in parts:
            names.append(f"{s}_rougeL_recall")
        if "likelihood" in parts:
            names += [f"{s}_prob", f"{s}_truth_ratio"]
    if "likelihood" in parts and "forget_caption" in sets:
        names.append("forget_quality")
    if set(parts) >= {"generation", "likelihood"} and set(sets) == set(SETS):
        names += ["model_utility", "real_score", "retain_score", "forget_score"]
    return names


def compute_metrics(records: list[dict], mode: str, reference: ReferenceData | None) -> dict[str, float]:
    """Every CLEAR metric the records allow; NaN where a set or the reference is missing."""
    out: dict[str, float] = {}
    for s in SETS:
        rouge = _split_values(records, s, "rougeL_recall")
        out[f"{s}_rougeL_recall"] = float(np.mean(rouge)) if rouge else NAN
        probs = _split_values(records, s, "prob")
        out[f"{s}_prob"] = float(np.mean(probs)) if probs else NAN
        ratios = set_truth_ratios(records, s, mode)
        stat = truth_ratio_forget_stat if s in FORGET_SETS else truth_ratio_retain_stat
        out[f"{s}_truth_ratio"] = stat(ratios) if ratios else NAN
    out["model_utility"] = model_utility([out[f"{s}_{m}"] for s in RETAIN_SETS + REAL_SETS for m in METRICS])
    out["real_score"] = domain_score([out[f"{s}_{m}"] for s in REAL_SETS for m in METRICS])
    out["retain_score"] = domain_score([out[f"{s}_{m}"] for s in RETAIN_SETS for m in METRICS])
    out["forget_score"] = domain_score([out[f"{s}_{m}"] for s in FORGET_SETS for m in METRICS])
    forget = set_truth_ratios(records, "forget_caption", mode)
    out["forget_quality"] = forget_quality(forget, reference.forget_truth_ratios) if reference and forget else NAN
    return out


def reference_record(records: list[dict], forget_split: str, options: dict[str, Any]) -> dict[str, Any]:
    """What this run contributes as the gold reference of others (written into lm-eval's results file)."""
    ratios = set_truth_ratios(records, "forget_caption", options.get("mode", "default"))
    return {"format": REFERENCE_FORMAT, "forget_split": forget_split, "n_forget": len(ratios),
            "forget_truth_ratio": ratios, "forget_question_keys": None, **options}
