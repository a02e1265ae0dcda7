"""One of our lm-eval runs written as an open-unlearning (OU) evaluation folder, for OU's plotting and analysis
scripts: ``TOFU_EVAL.json`` + ``TOFU_SUMMARY.json`` (a TOFU task), ``MUSE_EVAL.json`` + ``MUSE_SUMMARY.json`` (a MUSE
task), the reverse of :mod:`unlearn_app.open_unlearning.reader`'s reader and in the schema OU's evaluator writes
(``src/evals/base.py``: ``{metric: {"agg_value": ..., "value_by_index": {"<index>": {...}}}}``, and the SUMMARY's
``{metric: agg_value}``).

Every metric of ours with an OU name (the reader's tables, inverted) gets its ``agg_value``. Per-item values
(``value_by_index``) come from what the run kept: the per-doc records of lm-eval's samples files (``--log_samples``),
else the reference record of the results file (the forget truth ratios, the LOSS attack's per-item losses). Kept out:
per-item truth ratios under a non-default aggregation (OU's per-item ``score`` differs by aggregation), and
``forget_quality`` / ``model_utility`` / ``privleak``, which OU stores as ``agg_value`` only.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from unlearn_app.open_unlearning.reader import MUSE_NAMES, TOFU_NAMES

#: OU key -> (our population, our per-item key) for TOFU items (population: the record's ``split``).
TOFU_ITEMS = {
    "forget_Q_A_ROUGE": ("forget", "rougeL_recall"), "retain_Q_A_ROUGE": ("retain", "rougeL_recall"),
    "ra_Q_A_ROUGE": ("ra", "rougeL_recall"), "wf_Q_A_ROUGE": ("wf", "rougeL_recall"),
    "forget_Q_A_Prob": ("forget", "prob"), "retain_Q_A_Prob": ("retain", "prob"),
    "ra_Q_A_Prob_normalised": ("ra", "prob"), "wf_Q_A_Prob_normalised": ("wf", "prob"),
    "forget_truth_ratio": ("forget", "truth_ratio"), "retain_Truth_Ratio": ("retain", "truth_ratio"),
    "ra_Truth_Ratio": ("ra", "truth_ratio"), "wf_Truth_Ratio": ("wf", "truth_ratio"),
    "extraction_strength": ("forget", "extraction_strength"), "exact_memorization": ("forget", "exact_memorization"),
}
#: The same for MUSE (population: the record's ``set``).
MUSE_ITEMS = {
    "forget_verbmem_ROUGE": ("verbmem_forget", "rougeL_f1"), "forget_knowmem_ROUGE": ("knowmem_forget", "rougeL_f1"),
    "retain_knowmem_ROUGE": ("knowmem_retain", "rougeL_f1"),
    "extraction_strength": ("verbmem_forget", "extraction_strength"),
    "exact_memorization": ("verbmem_forget", "exact_memorization"),
}
#: OU's MIA attacks (entries with ``forget`` / ``holdout`` per-item scores) and our per-item score keys.
ATTACKS = {"mia_loss": "mia_loss", "mia_zlib": "mia_zlib", "mia_min_k": "mia_min_k",
           "mia_min_k_plus_plus": "mia_min_k_plus_plus", "mia_gradnorm": "mia_gradnorm"}


#: The fields of a line of lm-eval's samples file that are not a metric's value (the document itself among them).
SAMPLE_FIELDS = frozenset({"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics",
                           "doc_hash", "prompt_hash", "target_hash"})


class ExportError(ValueError):
    """A run that cannot be exported; the message says why and what to pass."""


def benchmark_of(task: str) -> str | None:
    """``TOFU`` / ``MUSE`` for our TOFU / MUSE tasks (and their likelihood / ROUGE / part variants), else None."""
    if task == "tofu" or task.startswith("tofu_forget"):
        return "TOFU"
    if task == "muse" or task.startswith(("muse_news", "muse_books")):
        return "MUSE"
    return None


def _number(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and not math.isnan(x) else None


def _by_index(values: list[Any], key: str = "score") -> dict[str, dict[str, Any]]:
    return {str(i): {key: v} for i, v in enumerate(values)}


def _item_key(kind: str) -> str:
    """The per-item key OU stores a metric's values under (probability: ``prob``, ROUGE: ``rougeL_recall`` /
    ``rougeL_f1``, truth ratio, memorization and MIA scores: ``score``), as the reader reads them."""
    return kind if kind in ("prob", "rougeL_recall", "rougeL_f1") else "score"


def _records(results_file: Path, task: str) -> list[dict]:
    """The per-doc records of ``task`` in the samples files beside the results file (lm-eval's ``--log_samples``:
    ``samples_<task>_<stamp>.jsonl``, lm-eval 0.5's ``samples_<group>::<task>_<stamp>.jsonl`` of a task run through its
    group; each line holding the record under every metric name); empty without them."""
    from harness_ext.results import samples_files

    files = samples_files(results_file, task)
    out = []
    for file in files:
        for line in file.read_text().splitlines():
            row = json.loads(line) if line.strip() else {}
            record = next((v for k, v in row.items() if k not in SAMPLE_FIELDS and isinstance(v, dict)
                           and "index" in v and ("split" in v or "set" in v)), None)
            if record is not None:
                out.append(record)
    return out


def _items(records: list[dict], population: str, key: str, field: str) -> list[Any]:
    """The ``key`` values of a population's records that have one, in item order (a None kept: OU keeps an
    empty answer's exact memorization as None)."""
    rows = sorted((r for r in records if r.get(field) == population and key in r), key=lambda r: r["index"])
    values = [r[key] for r in rows]
    return [] if any(isinstance(v, float) and math.isnan(v) for v in values) else values  # NaN: the part did not run


def export_task(results: dict[str, Any], task: str, results_file: Path) -> tuple[str, dict, dict]:
    """``(BENCH, EVAL, SUMMARY)`` of one of our TOFU / MUSE tasks in a parsed lm-eval results file."""
    bench = benchmark_of(task)
    if bench is None:
        raise ExportError(f"{task} is not a TOFU or MUSE task; open-unlearning's folders hold those two only.")
    names, item_keys = (TOFU_NAMES, TOFU_ITEMS) if bench == "TOFU" else (MUSE_NAMES, MUSE_ITEMS)
    field, forget, holdout = ("split", "forget", "holdout") if bench == "TOFU" else ("set", "privleak_forget",
                                                                                   "privleak_holdout")
    metrics = {k.split(",")[0]: v for k, v in results["results"][task].items() if k.endswith(",none")}
    config = results.get("configs", {}).get(task, {})
    modes = (config.get("provenance") or {}).get("metric_modes") or {}
    reference = config.get("unlearning_reference") or {}
    records = _records(results_file, task)
    eval_logs: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    for ou_key, (ours, kind) in names.items():
        value = _number(metrics.get(ours))
        if value is None:
            continue
        entry: dict[str, Any] = {"agg_value": value}
        if ou_key in item_keys and records:
            population, key = item_keys[ou_key]
            values = _items(records, population, key, field)
            if values and not (key == "truth_ratio" and modes.get("truth_ratio_aggregator")):
                entry["value_by_index"] = _by_index(values, _item_key(kind))
        if ou_key == "forget_truth_ratio" and "value_by_index" not in entry and reference.get("forget_truth_ratio") \
                and not modes.get("truth_ratio_aggregator"):
            entry["value_by_index"] = _by_index(reference["forget_truth_ratio"])
        if ou_key in ATTACKS:
            scores = {s: _items(records, p, ATTACKS[ou_key], field) for s, p in (("forget", forget), ("holdout", holdout))}
            if ou_key == "mia_loss" and not all(scores.values()):
                scores = {s: list((reference.get("mia_loss") or {}).get(s) or []) for s in ("forget", "holdout")}
            if all(scores.values()) and not any(x is None for v in scores.values() for x in v):
                entry.update({s: {"agg_value": sum(v) / len(v), "value_by_index": _by_index(v)}
                              for s, v in scores.items()}, auc=value)
        eval_logs[ou_key] = entry
        summary[ou_key] = value
    if not summary:
        raise ExportError(f"{task} in {results_file} holds no metric open-unlearning names.")
    return bench, eval_logs, summary


def export_run(results_file: Path, out: Path) -> list[Path]:
    """Write each TOFU / MUSE task of ``results_file`` into ``out`` (one OU folder per task when it holds several:
    ``out/<task>/``); returns the files written."""
    from harness_ext.results import read_results_file
    from unlearn_app import output_guard

    results = read_results_file(results_file)  # lm-eval 0.5's group::task under the task's name
    groups = set(results.get("group_subtasks") or {}) - set(results.get("configs") or {})  # `--tasks tofu`'s tofu
    tasks = [t for t in results.get("results", {}) if benchmark_of(t) and t not in groups]
    if not tasks:
        raise ExportError(f"{results_file} holds no TOFU or MUSE task (tasks: {', '.join(results.get('results', {}))}).")
    written = []
    for task in tasks:
        bench, eval_logs, summary = export_task(results, task, results_file)
        folder = out if len(tasks) == 1 else out / task
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in ((f"{bench}_EVAL.json", eval_logs), (f"{bench}_SUMMARY.json", summary)):
            output_guard.write_text(folder / name, json.dumps(dict(sorted(data.items())), indent=4))  # as OU's save_logs
            written.append(folder / name)
    return written
