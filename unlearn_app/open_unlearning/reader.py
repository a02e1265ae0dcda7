"""open-unlearning (OU) evaluation folders as runs.

OU's evaluator writes, per benchmark, ``<BENCH>_EVAL.json`` (every metric it computed, the ``pre_compute`` ones
included: ``agg_value`` and per-item ``value_by_index``) and ``<BENCH>_SUMMARY.json`` (metric -> ``agg_value`` of
the metrics asked for), with ``BENCH`` = ``TOFU`` or ``MUSE``. This module reads such a folder as a
:class:`~unlearn_app.reports.evaluated_run.Run`: OU's metric names mapped to ours (:data:`TOFU_NAMES`, :data:`MUSE_NAMES`), every
value recomputed from the per-item values where they are in the EVAL file (Forget Quality and PrivLeak against a
``reference`` run of either kind when one is given), and one note per value in OU's files that disagrees with the
recomputation: the table shows the recomputed value, the note shows OU's.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness_ext.results import ResultsFileError
from unlearn_tasks.metrics import mia
from unlearn_tasks.metrics.tofu import forget_quality, model_utility, truth_ratio_aggregate

BENCHMARKS = ("TOFU", "MUSE")

#: OU's TOFU metric key (in TOFU_EVAL.json / TOFU_SUMMARY.json) -> (our metric name, how its value is computed).
TOFU_NAMES: dict[str, tuple[str, str]] = {
    "forget_quality": ("forget_quality", "forget_quality"),
    "model_utility": ("model_utility", "model_utility"),
    "forget_Q_A_ROUGE": ("forget_rougeL_recall", "rougeL_recall"),
    "forget_Q_A_Prob": ("forget_prob", "prob"),
    "forget_truth_ratio": ("forget_truth_ratio", "forget_truth_ratio"),
    "retain_Q_A_ROUGE": ("retain_rougeL_recall", "rougeL_recall"),
    "retain_Q_A_Prob": ("retain_prob", "prob"),
    "retain_Truth_Ratio": ("retain_truth_ratio", "true_better"),
    "ra_Q_A_ROUGE": ("ra_rougeL_recall", "rougeL_recall"),
    "ra_Q_A_Prob_normalised": ("ra_prob", "prob"),
    "ra_Truth_Ratio": ("ra_truth_ratio", "true_better"),
    "wf_Q_A_ROUGE": ("wf_rougeL_recall", "rougeL_recall"),
    "wf_Q_A_Prob_normalised": ("wf_prob", "prob"),
    "wf_Truth_Ratio": ("wf_truth_ratio", "true_better"),
    "mia_min_k": ("mia_min_k_auc", "auc"),
    "mia_min_k_plus_plus": ("mia_min_k_plus_plus_auc", "auc"),
    "mia_loss": ("mia_loss_auc", "auc"),
    "mia_zlib": ("mia_zlib_auc", "auc"),
    "mia_gradnorm": ("mia_gradnorm_auc", "auc"),
    "mia_reference": ("mia_reference_auc", "auc"),
    "privleak": ("privleak", "privleak"),
    "extraction_strength": ("extraction_strength", "score"),
    "exact_memorization": ("exact_memorization", "score"),
    "forget_Q_A_gibberish": ("forget_gibberish", "score"),
}

#: OU's MUSE metric key (in MUSE_EVAL.json / MUSE_SUMMARY.json) -> (our metric name, how its value is computed).
MUSE_NAMES: dict[str, tuple[str, str]] = {
    "forget_verbmem_ROUGE": ("forget_verbmem", "rougeL_f1"),
    "forget_knowmem_ROUGE": ("forget_knowmem", "rougeL_f1"),
    "retain_knowmem_ROUGE": ("retain_knowmem", "rougeL_f1"),
    "privleak": ("privleak", "privleak"),
    "mia_min_k": ("mia_min_k_auc", "auc"),
    "mia_min_k_plus_plus": ("mia_min_k_plus_plus_auc", "auc"),
    "mia_loss": ("mia_loss_auc", "auc"),
    "mia_zlib": ("mia_zlib_auc", "auc"),
    "mia_gradnorm": ("mia_gradnorm_auc", "auc"),
    "mia_reference": ("mia_reference_auc", "auc"),
    "extraction_strength": ("extraction_strength", "score"),
    "exact_memorization": ("exact_memorization", "score"),
    "forget_gibberish": ("forget_gibberish", "score"),
}

#: OU's 9 Model Utility parts (its ``model_utility.yaml``), recomputed from their per-item values.
UTILITY_PARTS = ("retain_Q_A_Prob", "retain_Q_A_ROUGE", "retain_Truth_Ratio",
                 "ra_Q_A_Prob_normalised", "ra_Q_A_ROUGE", "ra_Truth_Ratio",
                 "wf_Q_A_Prob_normalised", "wf_Q_A_ROUGE", "wf_Truth_Ratio")

#: Relative tolerance under which OU's value and the recomputation count as equal (floating-point summation order).
TOLERANCE = 1e-6

NAN = float("nan")

#: Where :func:`as_results` keeps the OU files read and the disagreements found (``configs.<task>.<NOTES_KEY>``).
NOTES_KEY = "open_unlearning"


class OuFolderError(ResultsFileError):
    """An OU folder that cannot be read as a run, or a reference that cannot serve it; the message says why."""


def read_json(path: Path) -> Any:
    """One of OU's JSON files; :class:`OuFolderError` naming it when it cannot be read."""
    import json

    try:
        return json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise OuFolderError(f"Cannot read the open-unlearning log {path}: {e}") from None
    except json.JSONDecodeError as e:
        raise OuFolderError(f"{path} is not valid JSON ({e.msg} at line {e.lineno}); re-run open-unlearning's "
                            "evaluation to rewrite it, or leave it out.") from None


# --------------------------------------------------------------------------- finding OU folders
def ou_files(path: str | Path) -> dict[str, tuple[Path | None, Path | None]]:
    """``{BENCH: (EVAL file, SUMMARY file)}`` of an OU folder (or of the folder of a ``<BENCH>_EVAL.json`` /
    ``<BENCH>_SUMMARY.json`` given itself); empty if ``path`` is no OU evaluation."""
    path = Path(path)
    if path.is_file():
        m = re.fullmatch(r"(TOFU|MUSE)_(EVAL|SUMMARY)\.json", path.name)
        if not m:
            return {}
        path = path.parent
    if not path.is_dir():
        return {}
    found = {}
    for bench in BENCHMARKS:
        ev, su = path / f"{bench}_EVAL.json", path / f"{bench}_SUMMARY.json"
        if ev.is_file() or su.is_file():
            found[bench] = (ev if ev.is_file() else None, su if su.is_file() else None)
    return found


def is_ou_folder(path: str | Path) -> bool:
    return bool(ou_files(path))


def ou_folders_under(path: str | Path) -> list[Path]:
    """Every OU evaluation folder at or below ``path``, sorted."""
    path = Path(path)
    if is_ou_folder(path):
        return [path.parent if path.is_file() else path]
    if not path.is_dir():
        return []
    folders = {p.parent for pattern in ("*_EVAL.json", "*_SUMMARY.json") for p in path.rglob(pattern)}
    return sorted(f for f in folders if is_ou_folder(f))


# --------------------------------------------------------------------------- per-item values
def _items(entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        return {}
    items = entry.get("value_by_index")
    return items if isinstance(items, dict) else {}


def _sorted_items(items: dict[str, Any]) -> list[Any]:
    return [items[k] for k in sorted(items, key=lambda k: (len(str(k)), str(k)))]


def item_values(entry: Any, key: str) -> list[float]:
    """Per-item ``key`` values of an OU metric entry, in index order, Nones left out; a list per item (several
    answers) is averaged, as OU's ``aggregate_to_1D`` does."""
    out = []
    for v in _sorted_items(_items(entry)):
        x = v.get(key) if isinstance(v, dict) else None
        if x is None:
            continue
        out.append(float(np.mean(np.asarray(x, dtype=np.float64))))
    return out


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else NAN


def _auc(entry: Any) -> float:
    """AUROC of an OU MIA entry from its forget / holdout per-item scores (NaN if it holds none)."""
    if not isinstance(entry, dict):
        return NAN
    forget, holdout = item_values(entry.get("forget"), "score"), item_values(entry.get("holdout"), "score")
    return mia.mia_auroc(forget, holdout) if forget and holdout else NAN


def _probability_ratios(logs: dict[str, Any]) -> list[tuple[float, float]] | None:
    """Per-item ``(p_correct, p_wrong)`` of the forget truth ratio from the ``pre_compute`` entries OU caches in its
    EVAL file (``forget_Q_A_PARA_Prob``, ``forget_Q_A_PERT_Prob``: ``p = exp(-avg_loss)``, the wrong answers'
    losses averaged first, as OU does); None when they are not there."""
    para, pert = _items(logs.get("forget_Q_A_PARA_Prob")), _items(logs.get("forget_Q_A_PERT_Prob"))
    keys = sorted(set(para) & set(pert), key=lambda k: (len(str(k)), str(k)))
    out = []
    for k in keys:
        c, w = (para[k] or {}).get("avg_loss"), (pert[k] or {}).get("avg_loss")
        if c is None or w is None:
            continue
        out.append((math.exp(-float(np.mean(c))), math.exp(-float(np.mean(w)))))
    return out or None


def forget_truth_ratio_mode(logs: dict[str, Any]) -> str:
    """Which of OU's aggregations wrote ``forget_truth_ratio``: its per-item scores are ``p_w / p_c`` for
    ``closer_to_1_better`` and ``p_c / (p_c + p_w)`` for ``prob_mean``, told apart with the per-item probabilities
    OU caches beside them; ``closer_to_1_better`` (OU's default config) when those are not there."""
    scores = item_values(logs.get("forget_truth_ratio"), "score")
    probs = _probability_ratios(logs)
    if not scores or not probs or len(probs) != len(scores):
        return "closer_to_1_better"
    as_prob_mean = [c / (c + w + 1e-10) for c, w in probs]
    as_ratio = [w / (c + 1e-10) for c, w in probs]
    miss = lambda ref: max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(scores, ref))  # noqa: E731
    return "prob_mean" if miss(as_prob_mean) < miss(as_ratio) else "closer_to_1_better"


def forget_truth_ratios(logs: dict[str, Any]) -> list[float]:
    """OU's per-item forget truth ratios as ``R = p_wrong / p_correct`` whatever aggregation wrote them."""
    scores = item_values(logs.get("forget_truth_ratio"), "score")
    if forget_truth_ratio_mode(logs) == "prob_mean":
        return [w / (c + 1e-10) for c, w in _probability_ratios(logs) or []]
    return scores


# --------------------------------------------------------------------------- the reference
@dataclass
class OuReference:
    """What Forget Quality and PrivLeak need from a retain run of either kind."""

    forget_truth_ratios: list[float] | None
    min_k_auc: float
    source: str
    path: str


def _reference(path: str, bench: str, task: str, n_forget: int | None) -> OuReference:
    """The reference run at ``path``: an OU folder, or an lm-eval output of ours (or a legacy TOFU log)."""
    from unlearn_tasks.reference_logs import ReferenceLogError

    files = ou_files(path)
    if bench in files and files[bench][0] is not None:
        logs = read_json(files[bench][0])
        ratios = forget_truth_ratios(logs) if bench == "TOFU" else None
        auc = _auc(logs.get("mia_min_k"))
        if math.isnan(auc) and isinstance((logs.get("mia_min_k") or {}).get("agg_value"), (int, float)):
            auc = float(logs["mia_min_k"]["agg_value"])
        return OuReference(ratios or None, auc, f"open-unlearning log {files[bench][0]}", str(files[bench][0]))
    try:
        if bench == "TOFU":
            from unlearn_tasks.tofu.reference import load_reference as load_tofu

            split = task.removeprefix("tofu_")
            if split == task:
                raise OuFolderError(f"cannot tell the forget split of the open-unlearning run to read the reference {path} "
                                    "for it; put forget01/forget05/forget10 in its folder name")
            ref = load_tofu(path, split, n_forget=n_forget)
            return OuReference(ref.forget_truth_ratios, ref.mia_auc.get("mia_min_k_auc", NAN), ref.source,
                               str(ref.path or path))
        from unlearn_tasks.muse.reference import load_reference as load_muse

        corpus = task.removeprefix("muse_")
        if corpus == task:
            raise OuFolderError(f"cannot tell the MUSE corpus of the open-unlearning run to read the reference {path} "
                                "for it; put News or Books in its folder name")
        ref = load_muse(path, corpus)
        return OuReference(None, ref.mia_auc.get("mia_min_k_auc", NAN), ref.source, str(ref.path or path))
    except (ReferenceLogError, FileNotFoundError) as e:
        raise OuFolderError(f"reference {path}: {e}") from None


# --------------------------------------------------------------------------- one benchmark's metrics
@dataclass
class OuTask:
    """One benchmark of an OU folder as our task: metrics, the disagreements found, the files read."""

    task: str
    metrics: dict[str, float]
    notes: list[str] = field(default_factory=list)
    modes: dict[str, Any] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    reference: OuReference | None = None


def task_name(bench: str, logs: dict[str, Any], folder: Path) -> str:
    """Our task name for an OU evaluation: ``tofu_<split>`` from the number of forget items (or the folder name),
    ``muse_news`` / ``muse_books`` from the folder name; ``tofu`` / ``muse`` when neither tells."""
    where = str(folder).lower()
    if bench == "TOFU":
        from unlearn_tasks.tofu.splits import FORGET_SIZES

        for key in ("forget_Q_A_Prob", "forget_truth_ratio", "extraction_strength", "forget_Q_A_ROUGE"):
            n = len(_items(logs.get(key)))
            sizes = [s for s, size in FORGET_SIZES.items() if size == n]
            if sizes:
                return f"tofu_{sizes[0]}"
        m = re.search(r"forget(01|05|10)", where)
        return f"tofu_forget{m.group(1)}" if m else "tofu"
    corpus = next((c for c in ("news", "books") if c in where), None)
    return f"muse_{corpus}" if corpus else "muse"


def _n_forget(logs: dict[str, Any]) -> int | None:
    n = len(_items(logs.get("forget_truth_ratio")))
    return n or None


def _recompute(kind: str, entry: Any, logs: dict[str, Any]) -> float:
    if kind in ("prob", "rougeL_recall", "rougeL_f1", "score"):
        return _mean(item_values(entry, kind))
    if kind == "true_better":
        return truth_ratio_aggregate(item_values(entry, "score"), "true_better")
    if kind == "forget_truth_ratio":
        mode = forget_truth_ratio_mode(logs)
        scores = item_values(entry, "score")
        return _mean(scores) if mode == "prob_mean" else truth_ratio_aggregate(scores, mode, eps=1e-10)
    if kind == "auc":
        return _auc(entry)
    if kind == "model_utility":
        parts = [_recompute(TOFU_NAMES[p][1], logs.get(p), logs) for p in UTILITY_PARTS]
        return model_utility(parts) if not any(math.isnan(p) for p in parts) else NAN
    return NAN


def _ou_value(entry: Any) -> float | None:
    value = entry.get("agg_value") if isinstance(entry, dict) else entry
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _agree(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=1e-12)


def read_benchmark(bench: str, folder: Path, eval_file: Path | None, summary_file: Path | None,
                   reference: str | dict[str, str] | None = None) -> OuTask:
    """One benchmark's metrics under our names (see the module docstring)."""
    logs = read_json(eval_file) if eval_file else {}
    summary = read_json(summary_file) if summary_file else {}
    if not isinstance(logs, dict) or not isinstance(summary, dict):
        raise OuFolderError(f"{eval_file or summary_file} is not an open-unlearning {bench} log (a JSON object)")
    names = TOFU_NAMES if bench == "TOFU" else MUSE_NAMES
    task = task_name(bench, logs, folder)
    out = OuTask(task, {}, files=[str(f) for f in (eval_file, summary_file) if f])
    if isinstance(reference, dict):  # one per split / corpus, as the tasks' ``reference`` option
        reference = reference.get(task.split("_", 1)[-1]) or reference.get(task)
    if reference:
        out.reference = _reference(str(reference), bench, task, _n_forget(logs))
    shown = [k for k in names if k in logs or k in summary]
    for key in shown:
        ours, kind = names[key]
        entry = logs.get(key)
        value = _recompute(kind, entry, logs)
        if kind == "forget_truth_ratio":
            out.modes["forget_truth_ratio"] = forget_truth_ratio_mode(logs)
        ref = out.reference
        if kind == "forget_quality" and ref is not None and ref.forget_truth_ratios:
            mine = forget_truth_ratios(logs)
            if not mine:
                raise OuFolderError(f"{eval_file}: no forget_truth_ratio.value_by_index to recompute Forget Quality "
                                    f"against {reference}")
            if len(mine) != len(ref.forget_truth_ratios):
                raise OuFolderError(f"reference {ref.path} covers {len(ref.forget_truth_ratios)} forget items, the "
                                    f"open-unlearning run {folder} {len(mine)}; pass the retain run of the same forget split")
            value = forget_quality(mine, ref.forget_truth_ratios)
        if kind == "privleak" and ref is not None:
            auc = _auc(logs.get("mia_min_k"))
            value = mia.privleak(auc, ref.min_k_auc) if not (math.isnan(auc) or math.isnan(ref.min_k_auc)) else NAN
        recomputed = not math.isnan(value)
        for source, theirs in (("EVAL", _ou_value(entry)), ("SUMMARY", _ou_value(summary.get(key)))):
            if theirs is None:
                continue
            if not recomputed:
                value = theirs  # nothing to recompute it from (e.g. Forget Quality without a reference)
                recomputed = True
                continue
            if not _agree(value, theirs):
                against = f" against {ref.source}" if ref is not None and kind in ("forget_quality", "privleak") else ""
                out.notes.append(f"{folder}: {key} = {theirs:.6g} in {bench}_{source}.json, but {value:.6g} "
                                 f"recomputed from the per-item values{against} (the table shows the recomputed value)")
        out.metrics[ours] = value
    for key in summary:  # metrics OU was asked for that have no name of ours: kept under OU's name
        if key not in names and _ou_value(summary[key]) is not None:
            out.metrics[key] = _ou_value(summary[key])
    return out


def read_ou_folder(path: str | Path, reference: str | dict[str, str] | None = None) -> list[OuTask]:
    """Every benchmark of the OU folder ``path`` (see :func:`read_benchmark`)."""
    files = ou_files(path)
    if not files:
        raise OuFolderError(f"{path} holds no open-unlearning TOFU_EVAL.json / TOFU_SUMMARY.json / MUSE_EVAL.json / "
                            "MUSE_SUMMARY.json")
    folder = Path(path) if Path(path).is_dir() else Path(path).parent
    return [read_benchmark(b, folder, ev, su, reference) for b, (ev, su) in files.items()]


def provenance(task: OuTask) -> dict[str, Any]:
    """A provenance entry in the shape our tasks write, saying the run is open-unlearning's."""
    ref = None
    if task.reference is not None:
        ref = {"path": task.reference.path, "source": task.reference.source}
    return {"package": "open-unlearning", "version": "n/a", "git_commit": None, "data": [], "data_fingerprint": None,
            "metric_modes": {"evaluator": "open-unlearning", **task.modes}, "reference": ref,
            "files": task.files}


def as_results(tasks: list[OuTask]) -> dict[str, Any]:
    """The OU run in lm-eval's results-file schema (``results.<task>.<metric>,none``, ``configs.<task>.provenance``),
    so that tools reading lm-eval output read it too."""
    return {"results": {t.task: {"alias": t.task, **{f"{m},none": v for m, v in t.metrics.items()}} for t in tasks},
            "configs": {t.task: {"task": t.task, "provenance": provenance(t),
                                 NOTES_KEY: {"files": t.files, "notes": t.notes}} for t in tasks}}
