"""The benchmarks whose generated answers ``unlearn judge`` reads, each declared once: its sets, which tasks' lm-eval
samples hold its generations and how one samples line gives an item (set, index, question, ground truth, answer),
the per-item record the aggregates are computed from, the aggregates and their directions.

* ``tofu``: the forget, retain, real-authors and world-facts answers of ``tofu_forgetNN`` / ``tofu_forgetNN_rouge``
  (``doc``: ``split``, ``index``, ``question``, ``answer``), judged by a verdict (revealed? still correct?), with
  ROUGE-L recall beside it for the agreement;
* ``mllmu``: the generation questions of ``mllmu_forgetNN_image`` / ``_text`` (``doc``: ``set``, ``part``
  ``generation``, ``id``, ``prompt``, ``answer``; the question read back from the release's prompt, the answer read
  from the generation as the release reads it), judged by a 1-10 factuality score, averaged per set.

A prompt file names its benchmark (:mod:`.prompt_files`); a family judges one benchmark."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from unlearn_tasks.metrics import judge as verdicts

#: ROUGE-L recall at or above which ROUGE says a TOFU answer carries the fact (the agreement's threshold).
ROUGE_THRESHOLD = 0.5
#: (split, index, question, ground truth, answer) of one samples line, unchecked (``_item`` checks the types).
RawItem = tuple[Any, Any, Any, Any, Any]


def generation(row: Mapping[str, Any]) -> str | None:
    """The first text among a sample's filtered responses (the generate_until request comes first)."""
    for resp in row.get("filtered_resps") or []:
        if isinstance(resp, list) and resp and isinstance(resp[0], str):
            return resp[0]
        if isinstance(resp, str):
            return resp
    return None


def threshold_of(modes: Mapping[str, Any] | None) -> float:
    """The run's ROUGE-L threshold from its ``metric_modes``; ValueError when it is not a number in [0, 1]."""
    value = (modes or {}).get("rouge_threshold", ROUGE_THRESHOLD)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"rouge_threshold {value!r} is not a number from 0 to 1")
    return float(value)


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


class JudgedBenchmark:
    """What one benchmark's judging needs (the TOFU declaration; :class:`MllmuJudged` overrides it)."""

    name = "tofu"
    label = "TOFU"
    sets: tuple[str, ...] = tuple(verdicts.SHARE_NAMES)
    scored = False  # judged by a score alone rather than a verdict
    uses_rouge = True  # each record holds the answer's ROUGE-L recall (the judge's agreement with ROUGE)
    hint = "the samples of tofu_forgetNN or tofu_forgetNN_rouge (generation part)"

    def is_source_task(self, task: str) -> bool:
        from unlearn_app.open_unlearning.writer import benchmark_of

        return benchmark_of(task) == "TOFU"

    def item_of_row(self, row: Mapping[str, Any]) -> RawItem | None:
        doc = row.get("doc")
        if not isinstance(doc, dict) or doc.get("split") not in self.sets:
            return None
        answer = generation(row)
        if answer is None:
            return None
        return doc.get("split"), doc.get("index"), doc.get("question"), doc.get("answer"), answer

    def valid_index(self, index: Any) -> bool:
        return isinstance(index, int) and not isinstance(index, bool)

    def record(self, split: str, index: Any, verdict: str, scores: dict[str, float] | None, ground_truth: str,
               answer: str) -> dict[str, Any]:
        from unlearn_tasks.metrics.rouge import rouge_l_recall

        out = {"split": split, "index": index, "verdict": verdict,
               "rougeL_recall": rouge_l_recall(ground_truth, answer)}
        return out | ({"scores": scores} if scores is not None else {})

    def record_ok(self, rec: Any) -> bool:
        return isinstance(rec, dict) and rec.get("split") in self.sets and rec.get("verdict") in verdicts.VERDICTS \
            and _finite(rec.get("rougeL_recall"))

    def aggregate(self, records: Iterable[Mapping], modes: Mapping[str, Any] | None) -> dict[str, float]:
        return verdicts.aggregate(records, threshold_of(modes))

    def lower_is_better(self) -> set[str]:
        return verdicts.lower_is_better()


class MllmuJudged(JudgedBenchmark):
    """MLLMU-Bench's generation answers, scored 1-10 for factuality against the ground truth (the release's
    ``eval_gpt.py``): per set the mean score over the parsable replies and the count of unparsable ones."""

    name = "mllmu"
    label = "MLLMU-Bench"
    sets = ("forget", "test", "retain", "celebrity")
    scored = True
    uses_rouge = False
    hint = "the samples of mllmu_forgetNN_image or mllmu_forgetNN_text (their generation questions)"
    #: The score a factuality prompt must name (its ``verdict_key``), and the metrics' suffix.
    score_key = "FACTUALITY"
    metric = "factuality"

    def is_source_task(self, task: str) -> bool:
        return task.startswith("mllmu_forget") and task.endswith(("_image", "_text"))

    def item_of_row(self, row: Mapping[str, Any]) -> RawItem | None:
        from unlearn_tasks.mllmu.prompts import generation_question, response

        doc = row.get("doc")
        if not isinstance(doc, dict) or doc.get("part") != "generation" or doc.get("set") not in self.sets:
            return None
        answer = generation(row)
        if answer is None:
            return None
        prompt = doc.get("prompt")
        question = generation_question(prompt) if isinstance(prompt, str) else None
        return doc.get("set"), doc.get("id"), question, doc.get("answer"), response(answer)

    def valid_index(self, index: Any) -> bool:
        return isinstance(index, str) and 0 < len(index) <= 200

    def record(self, split: str, index: Any, verdict: str, scores: dict[str, float] | None, ground_truth: str,
               answer: str) -> dict[str, Any]:
        return {"split": split, "index": index, "verdict": verdict} | ({"scores": scores} if scores is not None
                                                                        else {})

    def record_ok(self, rec: Any) -> bool:
        if not isinstance(rec, dict) or rec.get("split") not in self.sets:
            return False
        if rec.get("verdict") == verdicts.UNPARSABLE:
            return True
        scores = rec.get("scores")
        return rec.get("verdict") == verdicts.SCORED and isinstance(scores, dict) and _finite(
            scores.get(self.score_key))

    def aggregate(self, records: Iterable[Mapping], modes: Mapping[str, Any] | None) -> dict[str, float]:
        return verdicts.score_aggregate(records, self.sets, self.score_key, self.metric)

    def lower_is_better(self) -> set[str]:
        """The forget and test sets' factuality (the people to forget) and every set's count of unparsable replies."""
        names = {s: verdicts.score_metric_names(s, self.metric) for s in self.sets}
        return {names[s]["mean"] for s in ("forget", "test")} | {n["unparsable"] for n in names.values()}


BENCHMARKS: dict[str, JudgedBenchmark] = {b.name: b for b in (JudgedBenchmark(), MllmuJudged())}

