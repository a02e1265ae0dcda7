"""The judge's output, in lm-eval's schema so that ``unlearn report``, ``unlearn ci --from-results`` and the
leaderboard read it as a run: ``results_<date>.json`` with the aggregates of task ``judge_<task>`` (one per source
task: ``judge_tofu_forget10``), their directions (``higher_is_better``) and provenance (the judge, its revision, each
prompt's name, version and sha256, the ROUGE-L threshold), beside ``samples_judge_<task>_<date>.jsonl``: one line
per item with its question, ground truth, answer, the judge's reply and the verdict record the aggregates are
computed from (:func:`aggregates_from_samples`, what the leaderboard recomputes)."""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unlearn_app.judge.benchmarks import ROUGE_THRESHOLD, threshold_of  # noqa: F401 (the judge's results API)
from unlearn_tasks.metrics import judge as verdicts

PREFIX = "judge_"
#: The key of a sample line that holds its verdict record.
RECORD = "judge"


def is_judge_task(name: str) -> bool:
    return name.startswith(PREFIX)


@dataclass(frozen=True)
class Judged:
    """One judged item: what was asked, the reply, and its verdict record."""

    split: str
    index: int
    question: str
    ground_truth: str
    answer: str
    prompt: str  # the prompt's name
    reply: str
    record: dict[str, Any]  # split, index, verdict, rougeL_recall (and scores)


def sample_lines(judged: Sequence[Judged]) -> list[dict[str, Any]]:
    """The samples file's lines (lm-eval's ``doc_id`` / ``doc`` / ``filter`` and the verdict record)."""
    return [{"doc_id": i, "doc": {"split": j.split, "index": j.index, "question": j.question,
                                  "ground_truth": j.ground_truth, "answer": j.answer},
             "filter": "none", "prompt": j.prompt, "reply": j.reply, RECORD: j.record}
            for i, j in enumerate(judged)]


def aggregates_from_samples(rows: Sequence[Mapping[str, Any]], modes: Mapping[str, Any] | float | None = None
                            ) -> dict[str, float]:
    """Every judge metric from the samples' verdict records, by the benchmark and ROUGE-L threshold of the run's
    ``metric_modes`` (a bare number: the threshold of a TOFU run); ValueError naming the first bad line."""
    from unlearn_app.judge.prompt_files import benchmark_of_modes

    if isinstance(modes, (int, float)) and not isinstance(modes, bool):
        modes = {"rouge_threshold": modes}
    bench = benchmark_of_modes(modes)
    records = []
    for row in rows:
        rec = row.get(RECORD)
        if not bench.record_ok(rec):
            what = "split, verdict, rougeL_recall" if bench.uses_rouge else "split, verdict, scores"
            raise ValueError(f"document {row.get('doc_id')} has no verdict record ({what})")
        records.append(rec)
    return bench.aggregate(records, modes)


def directions(metrics: Mapping[str, float], lower: set[str] | None = None) -> dict[str, bool]:
    """lm-eval's ``higher_is_better`` of each metric (``lower``: the lower-is-better ones; default TOFU's)."""
    lower = verdicts.lower_is_better() if lower is None else lower
    return {m: m not in lower for m in metrics}


def stamp() -> str:
    """lm-eval's date stamp of its output files."""
    return datetime.datetime.now().strftime("%Y-%m-%dT%H-%M-%S.%f")


def write_outputs(folder: Path, tasks: Mapping[str, tuple[Sequence[Judged], dict[str, float]]],
                  provenance: Mapping[str, Any], when: str, lower: set[str] | None = None) -> list[Path]:
    """``results_<when>.json`` and one samples file per judge task in ``folder``; returns the files written."""
    results, configs, better, sizes, written = {}, {}, {}, {}, []
    for task, (judged, metrics) in tasks.items():
        results[task] = {"alias": task, **{f"{m},none": v for m, v in metrics.items()},
                         **{f"{m}_stderr,none": "N/A" for m in metrics}}
        configs[task] = {"task": task, "provenance": dict(provenance)}
        better[task] = directions(metrics, lower)
        sizes[task] = {"original": len(judged), "effective": len(judged)}
        path = folder / f"samples_{task}_{when}.jsonl"
        path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in sample_lines(judged)),
                        encoding="utf-8")
        written.append(path)
    path = folder / f"results_{when}.json"
    path.write_text(json.dumps({"results": results, "configs": configs, "higher_is_better": better,
                                "versions": dict.fromkeys(tasks, 1), "n-samples": sizes,
                                "date": when}, indent=2, ensure_ascii=False), encoding="utf-8")
    return [path, *written]
