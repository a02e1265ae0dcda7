"""Per-item TOFU scoring: turn one document's model outputs into a compact record of numbers.

Corpus metrics (:mod:`unlearn_tasks.tofu.aggregate`) are computed from these records only.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from unlearn_tasks.metrics import mia
from unlearn_tasks.metrics.rouge import rouge_l_recall
from unlearn_tasks.metrics.tofu import mean_logprob, option_normalised_prob, truth_ratio
from unlearn_tasks.tofu.options import TofuOptions

NAN = float("nan")
GENERATED_SETS = ("forget", "retain", "ra", "wf")
MIA_SETS = ("forget", "holdout")
PARAPHRASED_SETS = ("forget", "retain")


def question_key(question: str) -> str:
    """A short stable fingerprint of a question, used to check that a reference covers the same items."""
    return hashlib.sha1(" ".join(question.split()).lower().encode("utf-8")).hexdigest()[:12]


def scored_tokens(response: dict, answer_scoring: str) -> list[float]:
    """The answer token log-probs that count: all of them, or all but the first (TOFU's boundary rule)."""
    lps = list(response["logprobs"])
    return lps[1:] if answer_scoring == "tofu" and len(lps) > 1 else lps


def _scored_stats(response: dict, answer_scoring: str) -> tuple[list[float], list | None, list | None]:
    start = 1 if answer_scoring == "tofu" and len(response["logprobs"]) > 1 else 0
    mean, var = response.get("vocab_mean"), response.get("vocab_var")
    return (
        list(response["logprobs"][start:]),
        None if mean is None else list(mean[start:]),
        None if var is None else list(var[start:]),
    )


def answer_texts(doc: dict) -> list[str]:
    """The answers scored for a document, in request order: answer, [paraphrased], perturbed..."""
    texts = [doc["answer"]]
    if doc["split"] in PARAPHRASED_SETS:
        texts.append(doc["paraphrased_answer"])
    if doc["split"] != "holdout":
        texts.extend(doc["perturbed_answers"])
    return texts


def score_document(doc: dict, generation: str | None, responses: list[dict], opts: TofuOptions) -> dict[str, Any]:
    """The record of one document: ROUGE, probabilities, truth ratio and MIA scores (NaN where not applicable)."""
    split = doc["split"]
    record: dict[str, Any] = {"split": split, "index": doc["index"]}
    if split == "forget":
        record["qkey"] = question_key(doc["question"])
    record["rougeL_recall"] = rouge_l_recall(doc["answer"], generation) if generation is not None else NAN
    if not responses:
        return record

    mean_lps = [mean_logprob(scored_tokens(r, opts.answer_scoring)) for r in responses]
    answer_lp = mean_lps[0]
    record["answer_mean_logprob"] = answer_lp
    if split in ("ra", "wf"):
        record["prob"] = option_normalised_prob(math.exp(answer_lp), [math.exp(v) for v in mean_lps[1:]])
        record["truth_ratio"] = truth_ratio(answer_lp, mean_lps[1:], opts.truth_ratio_mean)
    else:
        record["prob"] = math.exp(answer_lp)
    if split in PARAPHRASED_SETS:
        record["truth_ratio"] = truth_ratio(mean_lps[1], mean_lps[2:], opts.truth_ratio_mean)
    if split in MIA_SETS:
        lps, vmean, vvar = _scored_stats(responses[0], opts.answer_scoring)
        record["mia_loss"] = mia.loss_score(lps)
        record["mia_zlib"] = mia.zlib_score(lps, doc["answer"])
        record["mia_min_k"] = mia.min_k_score(lps, opts.mia_k)
        record["mia_min_k_plus_plus"] = (
            mia.min_k_plus_plus_score(lps, vmean, vvar, opts.mia_k) if vmean is not None else NAN
        )
    return record
