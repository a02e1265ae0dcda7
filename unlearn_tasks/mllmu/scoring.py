"""Per-question MLLMU-Bench scoring (one generated answer -> a record) and the per-set means.

* classification: the answer's first character, upper-cased, must be the correct letter (:func:`prompts.choice_letter`);
* cloze: the ground truth, lower-cased, must occur in the answer, lower-cased;
* generation: ROUGE-1/2/L F1 (rouge-score, Porter stemmer; reference = ground truth) and BLEU (NLTK's
  ``sentence_bleu``, whitespace tokens, weights 1/4 each up to 4-grams, ``SmoothingFunction().method1``).

Per set: ``<set>_classification_acc``, ``<set>_cloze_acc`` (``release`` mode: percent, and 0 for a set with no
question, as the release prints them; ``clean``: a fraction, NaN when empty) and ``<set>_rouge1``, ``_rouge2``,
``_rougeL``, ``_bleu`` (fractions; NaN when the set has no question of the mode: the release omits them).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from unlearn_tasks.mllmu import prompts
from unlearn_tasks.mllmu.splits import SETS

NAN = float("nan")
PART_METRICS = {"classification": ("classification_acc",), "cloze": ("cloze_acc",),
                "generation": ("rouge1", "rouge2", "rougeL", "bleu")}


def metric_names(parts: list[str], sets: list[str]) -> list[str]:
    return [f"{s}_{m}" for s in SETS if s in sets for p in PART_METRICS if p in parts for m in PART_METRICS[p]]


@lru_cache(maxsize=1)
def _rouge():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)


def bleu(reference: str, hypothesis: str) -> float:
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    return float(sentence_bleu([reference.split()], hypothesis.split(),
                               smoothing_function=SmoothingFunction().method1))


def score_document(doc: dict, generated: str) -> dict[str, Any]:
    """One question's record: its set and evaluation, the answer read as the release reads it, and its scores."""
    answer = prompts.response(generated)
    out: dict[str, Any] = {"set": doc["set"], "part": doc["part"], "response": answer}
    if doc["part"] == "classification":
        letter = prompts.choice_letter(answer, doc["letters"])
        out.update(choice=letter, classification_acc=float(letter == doc["answer"]))
    elif doc["part"] == "cloze":
        out["cloze_acc"] = float(doc["answer"].lower() in answer.lower())
    else:
        scores = _rouge().score(doc["answer"], answer)
        out.update({m: float(scores[m].fmeasure) for m in ("rouge1", "rouge2", "rougeL")},
                   bleu=bleu(doc["answer"], answer))
    return out


def compute_metrics(records: list[dict], parts: list[str], sets: list[str], mode: str = "release") -> dict[str, float]:
    out = {}
    for s in SETS:
        if s not in sets:
            continue
        for part in PART_METRICS:
            if part not in parts:
                continue
            rows = [r for r in records if r["set"] == s and r["part"] == part]
            for m in PART_METRICS[part]:
                values = [r[m] for r in rows]
                mean = sum(values) / len(values) if values else NAN  # summed in order, as the release does
                if m.endswith("_acc") and mode == "release":
                    mean = (sum(values) / len(values)) * 100 if values else 0.0
                out[f"{s}_{m}"] = mean
    return out
