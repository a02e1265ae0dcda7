"""A model as judge of generated answers: the parse rules that turn a judge's text into a verdict, the per-split
shares of verdicts, and the judge's agreement with ROUGE-L recall. Pure functions, no model.

A verdict is ``"yes"`` (the answer carries the ground truth's fact: on the forget set it *reveals* it, on the retain,
real-authors and world-facts sets it is *still correct*), ``"no"``, or ``"unparsable"`` (the judge's text follows
no rule; counted and reported, never guessed). A prompt that asks for a score alone (MLLMU-Bench's 1-10 factuality)
gives ``"scored"`` or ``"unparsable"``, and its aggregates are the per-set mean score (:func:`score_aggregate`)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence

YES, NO, UNPARSABLE, SCORED = "yes", "no", "unparsable", "scored"
VERDICTS = (YES, NO, UNPARSABLE)

_FIRST_WORD = re.compile(r"[A-Za-z]+")
_JSON_OBJECT = re.compile(r"\{[^{}]*\}", re.DOTALL)


def parse_yes_no(text: str) -> str:
    """``yes`` / ``no`` when the judge's first word is Yes or No (any case, after leading spaces, quotes, ``*`` or
    other punctuation), else ``unparsable``."""
    match = _FIRST_WORD.search(text or "")
    if match is None or text[:match.start()].strip(" \t\r\n\"'*`.:>-#"):
        return UNPARSABLE
    word = match.group(0).lower()
    return word if word in (YES, NO) else UNPARSABLE


def parse_json_scores(text: str, keys: Sequence[str], low: float = 0, high: float = 10,
                      whole: bool = False) -> dict[str, float] | None:
    """The scores of the last ``{...}`` object in the judge's text when it holds exactly ``keys``, each a number
    from ``low`` to ``high`` (a JSON integer when ``whole``); None otherwise."""
    for match in reversed(list(_JSON_OBJECT.finditer(text or ""))):
        try:
            found = json.loads(match.group(0))
        except ValueError:
            continue
        if not isinstance(found, dict) or set(found) != set(keys):
            return None
        kinds = int if whole else (int, float)
        if not all(isinstance(v, kinds) and not isinstance(v, bool) and low <= v <= high for v in found.values()):
            return None
        return {k: float(found[k]) for k in keys}
    return None


def verdict_from_score(score: float | None, threshold: float, yes_below: bool) -> str:
    """``yes`` when ``score`` is below ``threshold`` (``yes_below``) or at least ``threshold`` (not ``yes_below``);
    ``unparsable`` when there is no score."""
    if score is None:
        return UNPARSABLE
    return YES if (score < threshold) == yes_below else NO


def yes_share(verdicts: Iterable[str]) -> float:
    """The share of ``yes`` among the parsable verdicts (NaN when none is parsable)."""
    parsable = [v for v in verdicts if v in (YES, NO)]
    return sum(v == YES for v in parsable) / len(parsable) if parsable else math.nan


def unparsable_count(verdicts: Iterable[str]) -> int:
    return sum(v == UNPARSABLE for v in verdicts)


def rouge_says_yes(rouge_l_recall: float, threshold: float) -> bool:
    """ROUGE-L recall's own verdict: the answer carries the fact when its recall is at least ``threshold``."""
    return rouge_l_recall >= threshold


def agreement(verdicts: Sequence[str], rouge: Sequence[float], threshold: float) -> tuple[float, float]:
    """(share of items where the judge and ROUGE-L recall >= ``threshold`` agree, Cohen's kappa), over the items
    with a parsable verdict. Kappa is (p_o - p_e) / (1 - p_e), p_e from each rater's share of yes; NaN when p_e is
    1 (both raters gave one answer to every item) or no item is parsable."""
    pairs = [(v == YES, rouge_says_yes(r, threshold)) for v, r in zip(verdicts, rouge, strict=True)
             if v in (YES, NO)]
    if not pairs:
        return math.nan, math.nan
    n = len(pairs)
    observed = sum(a == b for a, b in pairs) / n
    judge_yes = sum(a for a, _ in pairs) / n
    rouge_yes = sum(b for _, b in pairs) / n
    expected = judge_yes * rouge_yes + (1 - judge_yes) * (1 - rouge_yes)
    kappa = math.nan if math.isclose(expected, 1.0) else (observed - expected) / (1 - expected)
    return observed, kappa


#: The evaluation sets judged, and the name of the share of ``yes`` on each.
SHARE_NAMES = {"forget": "forget_judge_revealed", "retain": "retain_judge_correct", "ra": "ra_judge_correct",
               "wf": "wf_judge_correct"}


def metric_names(split: str) -> dict[str, str]:
    """The metrics of one set: ``share`` (of yes), ``unparsable`` (count), ``agreement`` and ``kappa`` (with
    ROUGE-L recall)."""
    return {"share": SHARE_NAMES[split], "unparsable": f"{split}_judge_unparsable",
            "agreement": f"{split}_judge_rouge_agreement", "kappa": f"{split}_judge_rouge_kappa"}


def lower_is_better() -> set[str]:
    """Judge metrics for which lower is better unlearning: the forget set's share of revealed facts, and every
    set's count of unparsable verdicts (the rest, shares of correct answers and agreement, are higher-is-better)."""
    return {SHARE_NAMES["forget"]} | {metric_names(s)["unparsable"] for s in SHARE_NAMES}


def _by_split(records: Iterable[Mapping]) -> dict[str, list[Mapping]]:
    """``records`` grouped by their ``split``, in order."""
    by_split: dict[str, list[Mapping]] = {}
    for r in records:
        by_split.setdefault(r["split"], []).append(r)
    return by_split


def aggregate(records: Iterable[Mapping], threshold: float) -> dict[str, float]:
    """Every judge metric of the sets present in ``records`` (each ``{"split", "verdict", "rougeL_recall"}``)."""
    by_split = _by_split(records)
    out: dict[str, float] = {}
    for split in SHARE_NAMES:
        rows = by_split.get(split)
        if not rows:
            continue
        names = metric_names(split)
        verdicts = [r["verdict"] for r in rows]
        if any(v not in VERDICTS for v in verdicts):
            raise ValueError(f"{split}: a verdict is not one of {', '.join(VERDICTS)}")
        out[names["share"]] = yes_share(verdicts)
        out[names["unparsable"]] = float(unparsable_count(verdicts))
        out[names["agreement"]], out[names["kappa"]] = agreement(
            verdicts, [float(r["rougeL_recall"]) for r in rows], threshold)
    return out


def score_metric_names(split: str, metric: str) -> dict[str, str]:
    """The metrics of one set judged by a score prompt: ``mean`` (``<set>_<metric>``) and ``unparsable`` (count)."""
    return {"mean": f"{split}_{metric}", "unparsable": f"{split}_{metric}_unparsable"}


def score_aggregate(records: Iterable[Mapping], sets: Sequence[str], key: str, metric: str) -> dict[str, float]:
    """Per set present in ``records`` (each ``{"split", "verdict", "scores"}``, verdict ``scored`` or
    ``unparsable``): the mean of ``scores[key]`` over its scored items (NaN when none is) and the count of
    unparsable replies."""
    by_split = _by_split(records)
    out: dict[str, float] = {}
    for split in sets:
        rows = by_split.get(split)
        if not rows:
            continue
        if any(r["verdict"] not in (SCORED, UNPARSABLE) for r in rows):
            raise ValueError(f"{split}: a verdict is not one of {SCORED}, {UNPARSABLE}")
        scores = [float(r["scores"][key]) for r in rows if r["verdict"] == SCORED]
        names = score_metric_names(split, metric)
        out[names["mean"]] = sum(scores) / len(scores) if scores else math.nan
        out[names["unparsable"]] = float(sum(r["verdict"] == UNPARSABLE for r in rows))
    return out
