"""Per-document MUSE scoring: each document gives one record (VerbMem documents issue two requests, the others one).

* VerbMem: ROUGE-L F1 (unstemmed) of the greedy continuation vs the true continuation (its first 128 tokens), and
  open-unlearning's extraction strength / exact memorization of the true continuation (a second request);
* KnowMem: ROUGE-L F1 (unstemmed) of the greedy answer, cut at MUSE's stop strings, vs the answer;
* PrivLeak passages: the MIA scores (LOSS, zlib, Min-K%, Min-K%++) of the whole passage after BOS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from unlearn_tasks.metrics import mia
from unlearn_tasks.metrics.memorization import scores_from_matches
from unlearn_tasks.metrics.rouge import rouge_l_f1
from unlearn_tasks.muse.prompts import cut_at_stop

NAN = float("nan")


def part_of(doc: dict) -> str:
    """``verbmem``, ``knowmem`` or ``privleak`` for a document of :mod:`unlearn_tasks.muse.documents`."""
    return doc["set"].split("_", 1)[0]


def passage_scores(response: dict, text: str, k: float) -> dict[str, float]:
    """MIA scores of a passage from the ``unlearn_answer_logprobs`` response of ``("", text)`` without EOS (the
    passage's own tokens after BOS, as MUSE scores them)."""
    lps = list(response["logprobs"])
    if not lps:
        return {f"mia_{a}": NAN for a in ("loss", "zlib", "min_k", "min_k_plus_plus")}
    mean, var = response.get("vocab_mean"), response.get("vocab_var")
    return {
        "mia_loss": mia.loss_score(lps),
        "mia_zlib": mia.zlib_score(lps, text),
        "mia_min_k": mia.min_k_score(lps, k),
        "mia_min_k_plus_plus": mia.min_k_plus_plus_score(lps, mean, var, k) if mean is not None else NAN,
    }


def memorization(response: dict) -> dict[str, float | None]:
    """Exact memorization and extraction strength of a VerbMem passage from the teacher-forced argmax flags of its
    true continuation, as open-unlearning computes them on MUSE: every continuation token but the last (its
    token-wise statistics drop the last labelled token), its edge cases (see
    :mod:`unlearn_tasks.metrics.memorization`). Empty when the backend gave no flags."""
    flags = response.get("argmax_match")
    if flags is None:
        return {}
    em, es = scores_from_matches(list(flags)[:-1], "open-unlearning")
    return {"exact_memorization": em, "extraction_strength": es}


def score_document(doc: dict, response: Any, mia_k: float, reference_of: Callable[[dict], str]) -> dict[str, Any]:
    """One record: the set, the item's index, and its score(s). ``reference_of(doc)`` gives the reference text."""
    record: dict[str, Any] = {"set": doc["set"], "index": doc["index"]}
    part = part_of(doc)
    if part == "privleak":
        record.update(passage_scores(response, doc["text"], mia_k))
        return record
    output = str(response)
    if part == "knowmem":
        output = cut_at_stop(output)
    record["generation"] = output
    record["rougeL_f1"] = rouge_l_f1(reference_of(doc), output)
    return record
