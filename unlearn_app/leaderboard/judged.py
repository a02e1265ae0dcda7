"""``unlearn judge``'s per-item records re-derived from what a submission carries, so that no stored verdict, ROUGE
score or answer is taken on trust.

A line of a judge task's samples (``judge_<task>``, :mod:`unlearn_app.judge.results`) holds the item (``doc``: split,
index, question, ground truth, answer), the prompt's name, the judge's ``reply`` and the verdict record the
aggregates are computed from. Validation keeps none of the record:

* the **verdict** (or score) is re-derived from the reply by the parse rule of the prompt that the run's provenance
  names for the item's set, a prompt file this package holds with that name, version and sha256
  (:mod:`unlearn_app.judge.prompt_files`), the whole record by the prompts' benchmark
  (:mod:`unlearn_app.judge.benchmarks`: TOFU or MLLMU-Bench);
* **ROUGE-L recall** (TOFU) is recomputed from the item's answer and ground truth, with the function the judge uses;
* every judged **answer** must be the generation that the submission itself holds for that item (split and index)
  of the judged task (``<task>``: its lm-eval samples, or an open-unlearning run's ``TOFU_EVAL.json``), with its
  question and ground truth, and every generated item there must be judged once.

The aggregates are then recomputed from the re-derived records. A stored record that differs, or an answer that is
not the model's, is a problem (the submission fails). Without the judged task's generations in the submission, or with a
prompt this package does not hold, nothing ties the verdicts to the model: the judge's numbers stay unverified. The
reply itself is the judge's: it is never asked again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from unlearn_app.judge.benchmarks import BENCHMARKS, JudgedBenchmark
from unlearn_app.judge.inputs import OU_KEYS
from unlearn_app.judge.prompt_files import Prompt, PromptError, all_prompts, family_benchmark
from unlearn_app.judge.results import PREFIX, RECORD

#: At most this many per-item problems are listed for one task (then their count).
SHOWN = 5
#: Largest ground truth words x answer words whose ROUGE-L (a quadratic longest common subsequence) is recomputed:
#: far above a TOFU item (about 30 x 200), far below what would keep a validator busy for minutes.
MAX_ROUGE_CELLS = 250_000


@dataclass
class Rederived:
    """One judge task's samples with every verdict record re-derived (``rows``; None when it cannot be: then
    ``unverifiable`` says why), and the lines where the stored items disagree."""

    rows: list[dict[str, Any]] | None = None
    problems: list[str] = field(default_factory=list)
    unverifiable: str | None = None


def source_task(task: str) -> str:
    """The task whose generations ``task`` (``judge_<task>``) judged."""
    return task.removeprefix(PREFIX)


def _prompts(provenance: Mapping[str, Any] | None) -> dict[str, Prompt] | str:
    """The prompt of each set the run's provenance names, as this package holds it; or why there is none."""
    named = (provenance or {}).get("prompts")
    if not isinstance(named, dict) or not named:
        return "its provenance names no prompts"
    held = {(p.name, p.version, p.sha256): p for p in all_prompts()}
    out = {}
    for split, ident in named.items():
        key = tuple(ident.get(k) for k in ("name", "version", "sha256")) if isinstance(ident, dict) else None
        if key not in held:
            shown = f"{key[0]} version {key[1]}" if key else repr(ident)[:60]
            return f"its {split} prompt ({shown}) is not one this package holds, so its parse rule is unknown"
        out[split] = held[key]
    return out


def benchmark_of(provenance: Mapping[str, Any] | None) -> JudgedBenchmark:
    """The benchmark judged by the prompts the run's provenance names (TOFU when they are not this package's)."""
    prompts = _prompts(provenance)
    try:
        return family_benchmark(prompts.values()) if isinstance(prompts, dict) else BENCHMARKS["tofu"]
    except PromptError:
        return BENCHMARKS["tofu"]


def generations_of_samples(rows: list[dict[str, Any]], bench: JudgedBenchmark = BENCHMARKS["tofu"]
                           ) -> dict[tuple[str, Any], tuple[Any, Any, str]]:
    """(split, index) -> (question, ground truth, generation) of the judged task's lm-eval samples, as the judge
    reads them (:mod:`unlearn_app.judge.inputs`, by ``bench``'s reader)."""
    out = {}
    for row in rows:
        raw = bench.item_of_row(row) if str(row.get("filter", "none")) == "none" else None
        if raw is not None and bench.valid_index(raw[1]):
            out[(raw[0], raw[1])] = tuple(raw[2:])
    return out


def generations_of_ou(logs: dict[str, Any]) -> dict[tuple[str, int], tuple[Any, Any, Any]]:
    """The same from an open-unlearning ``TOFU_EVAL.json`` (each set's ``value_by_index``: ``input``, used as the
    question, ``ground_truth`` and ``generation``), as the judge reads it."""
    out = {}
    for split, key in OU_KEYS.items():
        entry = logs.get(key)
        by_index = entry.get("value_by_index") if isinstance(entry, dict) else None
        for idx, value in (by_index.items() if isinstance(by_index, dict) else ()):
            if isinstance(value, dict) and idx.isascii() and idx.isdigit() and len(idx) <= 9:
                out[(split, int(idx))] = (value.get("input"), value.get("ground_truth"), value.get("generation"))
    return out


def _text(value: Any) -> str:
    text = str(value)
    return repr(text if len(text) <= 40 else text[:37] + "...")


def rederive(task: str, rows: list[dict[str, Any]], provenance: Mapping[str, Any] | None,
             generated: Mapping[tuple[str, int], tuple[Any, Any, Any]] | None) -> Rederived:
    """``rows`` (the samples of judge task ``task``) with each verdict record re-derived (see the module
    docstring); ``generated``: the judged task's generations the submission carries (:func:`generations_of_samples`,
    :func:`generations_of_ou`), or None when it carries none."""
    prompts = _prompts(provenance)
    if isinstance(prompts, str):
        return Rederived(unverifiable=prompts)
    try:
        bench = family_benchmark(prompts.values())
    except PromptError as e:
        return Rederived(unverifiable=str(e))
    if generated is None:
        return Rederived(unverifiable=f"the generations of {source_task(task)} (its lm-eval samples, or "
                                      "open-unlearning's TOFU_EVAL.json), whose answers it judged, are not in the "
                                      "submission: submit that evaluation with it")
    out, problems, seen = [], [], set()
    for row in rows:
        if str(row.get("filter", "none")) != "none":
            continue
        n, doc, record, reply = row.get("doc_id"), row.get("doc"), row.get(RECORD), row.get("reply")
        fields = doc if isinstance(doc, dict) else {}
        split, index = fields.get("split"), fields.get("index")
        texts = [fields.get(k) for k in ("question", "ground_truth", "answer")]
        if split not in prompts or not bench.valid_index(index) or not all(isinstance(t, str) for t in [*texts, reply]) \
                or not isinstance(record, dict):
            problems.append(f"document {n}: not a judged item (doc with split, index, question, ground_truth and "
                            "answer; the reply; the verdict record)")
            continue
        question, truth, answer = texts
        prompt = prompts[split]
        verdict, scores = prompt.verdict(reply)
        if bench.uses_rouge and len(truth.split()) * len(answer.split()) > MAX_ROUGE_CELLS:
            problems.append(f"document {n}: its ground truth ({len(truth.split())} words) and answer "
                            f"({len(answer.split())} words) are too long to recompute ROUGE-L (at most "
                            f"{MAX_ROUGE_CELLS} word pairs)")
            continue
        rebuilt = bench.record(split, index, verdict, scores, truth, answer)
        key = (split, index)
        if row.get("prompt") != prompt.name:
            problems.append(f"document {n}: judged with prompt {_text(row.get('prompt'))}, but the run names "
                            f"{prompt.name} for the {split} set")
        if record.get("verdict") != verdict or (scores is not None and record.get("scores") != scores):
            problems.append(f"document {n}: verdict {_text(record.get('verdict'))} stored, but its reply "
                            f"{_text(reply)} gives {verdict!r} by {prompt.name} version {prompt.version}")
        stored, rouge = record.get("rougeL_recall"), rebuilt.get("rougeL_recall")
        if rouge is not None and (isinstance(stored, bool) or not isinstance(stored, (int, float)) or not math.isclose(
                stored, rouge, rel_tol=1e-6, abs_tol=1e-9)):
            shown = f"{stored:.6g}" if isinstance(stored, (int, float)) and not isinstance(stored, bool) else \
                _text(stored)
            problems.append(f"document {n}: rougeL_recall {shown} stored, but {rouge:.6g} recomputed from its answer "
                            "and ground truth")
        if (record.get("split"), record.get("index")) != key:
            problems.append(f"document {n}: its record names {record.get('split')} item {record.get('index')}, "
                            f"its doc {split} item {index}")
        if key in seen:
            problems.append(f"document {n}: {split} item {index} is judged twice")
        elif key not in generated:
            problems.append(f"document {n}: {split} item {index} is no generated answer of "
                            f"{source_task(task)}'s generations")
        elif generated[key] != (question, truth, answer):
            problems.append(f"document {n}: its question, ground truth or answer is not what "
                            f"{source_task(task)}'s generations hold for {split} item {index}")
        seen.add(key)
        out.append({**row, RECORD: rebuilt})
    unjudged = len(set(generated) - seen)
    if unjudged:
        problems.append(f"{unjudged} of the {len(generated)} generated answers of {source_task(task)} "
                        "are not judged (a judge's share over part of the answers)")
    if len(problems) > SHOWN:
        problems = problems[:SHOWN] + [f"... and {len(problems) - SHOWN} more item problem(s)"]
    return Rederived(out, problems)
