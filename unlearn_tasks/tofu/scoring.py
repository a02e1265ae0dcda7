"""Per-item TOFU scoring: turn one document's model outputs into a compact record of numbers.

Corpus metrics (:mod:`unlearn_tasks.tofu.aggregate`) are computed from these records only.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

from unlearn_tasks.generation_check import is_empty
from unlearn_tasks.metrics import mia
from unlearn_tasks.metrics.memorization import scores_from_matches
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


def hides_first(response: dict, answer_scoring: str) -> bool:
    """Whether TOFU's boundary rule hides the response's first scored token: in the ``tofu`` mode on the plain
    prompt (lm-eval splits before the answer's first token, open-unlearning's labels start after it); not for
    open-unlearning's chat tokens (``ou_labels``: the backend scored exactly its labels)."""
    return answer_scoring == "tofu" and not response.get("ou_labels")


def scored_tokens(response: dict, answer_scoring: str) -> list[float]:
    """The answer token log-probs that count: all of them, or all but the first (TOFU's boundary rule)."""
    lps = list(response["logprobs"])
    return lps[1:] if hides_first(response, answer_scoring) and len(lps) > 1 else lps


#: open-unlearning clamps the vocabulary variance of Min-K%++ at this value.
OU_VAR_FLOOR = 1e-6


def _token_window(response: dict, n: int, answer_scoring: str) -> slice:
    """The answer positions open-unlearning's token-wise statistics see in the ``tofu`` mode (TOFU's boundary rule
    where it applies, then the last labelled token, the EOS, dropped); every position in the ``all`` mode."""
    start = 1 if hides_first(response, answer_scoring) and n > 1 else 0
    stop = n - 1 if answer_scoring == "tofu" else n
    return slice(start, stop)


def memorization(response: dict, answer_scoring: str) -> tuple[float | None, float | None] | None:
    """(exact memorization, extraction strength) of the answer from the backend's teacher-forced argmax flags, on
    the tokens Min-K% scores (:func:`mia_token_stats`); open-unlearning's edge cases in the ``tofu`` mode, the
    definition's otherwise (see :mod:`unlearn_tasks.metrics.memorization`). None if the backend gave no flags."""
    flags = response.get("argmax_match")
    if flags is None:
        return None
    mode = "open-unlearning" if answer_scoring == "tofu" else "definition"
    return scores_from_matches(list(flags)[_token_window(response, len(flags), answer_scoring)], mode)


def mia_token_stats(response: dict, answer_scoring: str) -> tuple[list[float], list | None, list | None]:
    """(log-probs, vocab means, vocab variances) of the tokens that Min-K% and Min-K%++ score.

    ``all``: every answer token, EOS included (the tokens every other metric scores). ``tofu``: as open-unlearning,
    whose per-token MIA statistics drop the last labelled token (the EOS) after TOFU's boundary rule (on the plain
    prompt); so a one-token plain answer leaves nothing (scored 0, as open-unlearning does). LOSS and zlib use :func:`scored_tokens` in both modes:
    open-unlearning computes them from the average loss over all labelled tokens, EOS included.
    """
    window = _token_window(response, len(response["logprobs"]), answer_scoring)
    mean, var = response.get("vocab_mean"), response.get("vocab_var")
    return (
        list(response["logprobs"][window]),
        None if mean is None else list(mean[window]),
        None if var is None else list(var[window]),
    )


def zlib_text(doc: dict, response: dict, answer_scoring: str) -> str:
    """The text whose compressed size normalises the zlib attack: the answer; in the ``tofu`` mode, the scored
    tokens decoded as open-unlearning decodes its labels (on the plain prompt the answer without its first token;
    in a chat template the answer and the template's end of turn), when the backend reported it."""
    if answer_scoring == "tofu" and response.get("decoded_tail") is not None:
        return response["decoded_tail"]
    return doc["answer"]


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
    if generation is not None:
        record["empty_generation"] = is_empty(generation)
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
    if split == "forget":
        scores = memorization(responses[0], opts.answer_scoring)
        if scores is not None:
            record["exact_memorization"], record["extraction_strength"] = scores
    if split in MIA_SETS:
        scoring = opts.answer_scoring
        loss_lps = scored_tokens(responses[0], scoring)
        record["mia_loss"] = mia.loss_score(loss_lps)
        record["mia_zlib"] = mia.zlib_score(loss_lps, zlib_text(doc, responses[0], scoring))
        lps, vmean, vvar = mia_token_stats(responses[0], scoring)
        if not lps:
            record["mia_min_k"] = record["mia_min_k_plus_plus"] = 0.0
        else:
            record["mia_min_k"] = mia.min_k_score(lps, opts.mia_k)
            floor = OU_VAR_FLOOR if scoring == "tofu" else 0.0
            record["mia_min_k_plus_plus"] = (
                mia.min_k_plus_plus_score(lps, vmean, vvar, opts.mia_k, var_floor=floor) if vmean is not None else NAN
            )
    return record
