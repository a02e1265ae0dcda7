"""open-unlearning (OU) evaluation folders as runs.

OU's evaluator writes, per benchmark, ``<BENCH>_EVAL.json`` (every metric it computed, the ``pre_compute`` ones
included: ``agg_value`` and per-item ``value_by_index``) and ``<BENCH>_SUMMARY.json`` (metric -> ``agg_value`` of
the metrics asked for), with ``BENCH`` = ``TOFU`` or ``MUSE``. This module reads such a folder as a
:class:`~unlearn_app.reports.evaluated_run.Run`: OU's metric names mapped to ours (:data:`TOFU_NAMES`, :data:`MUSE_NAMES`), every
value recomputed from the per-item values where they are in the EVAL file (Forget Quality and PrivLeak against a
``reference`` run of either kind when one is given), and one note per value in OU's files that disagrees with the
recomputation: the table shows the recomputed value, the note shows OU's.

A value is never silently OU's: per-item values that are there but unusable (:class:`Unusable`: NaN, not a number,
out of range, an item without its value, an MIA without its holdout) give NaN with the reason
(:attr:`OuTask.invalid`), and a value with no per-item values at all is OU's stored one, marked
(:attr:`OuTask.not_recomputed`). The run itself is never its own reference.
"""

from __future__ import annotations

import math
import re
import sys
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
    from harness_ext.results import read_json_file

    return read_json_file(path, OuFolderError, "open-unlearning log", "open-unlearning's evaluation")


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
    if path.is_file():
        return [path.parent] if is_ou_folder(path) else []
    if not path.is_dir():
        return []
    folders = {p.parent for pattern in ("*_EVAL.json", "*_SUMMARY.json") for p in path.rglob(pattern)}
    return sorted(f for f in folders if is_ou_folder(f))


# --------------------------------------------------------------------------- per-item values
class Unusable(ValueError):
    """Per-item values that are in the file but cannot be recomputed from (NaN, not a number, out of range, an
    item without its value, an MIA without its holdout); the message says which and why."""


#: The range of each per-item key (inclusive): probabilities, ROUGE and memorization scores in [0, 1], truth
#: ratios >= 0 (infinity allowed: a correct answer of probability 0), MIA scores and losses any finite number.
UNIT = (0.0, 1.0)
RATIO = (0.0, math.inf)
ANY = (-sys.float_info.max, sys.float_info.max)  # finite
KIND_RANGES = {"prob": UNIT, "rougeL_recall": UNIT, "rougeL_f1": UNIT, "score": UNIT, "true_better": RATIO,
               "forget_truth_ratio": RATIO, "auc": ANY}


def _items(entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        return {}
    items = entry.get("value_by_index")
    return items if isinstance(items, dict) else {}


def _sorted_items(items: dict[str, Any]) -> list[Any]:
    return [items[k] for k in sorted(items, key=lambda k: (len(str(k)), str(k)))]


def _kind_of(x: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(type(x), type(x).__name__)


def _number(x: Any, where: str, low: float, high: float) -> float:
    """``x`` as a float in [low, high] (NaN never), else :class:`Unusable` naming ``where``."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        raise Unusable(f"{where} is {x!r}, not a number")
    x = float(x)
    if math.isnan(x):
        raise Unusable(f"{where} is NaN")
    if math.isinf(x) and not low <= x <= high:
        raise Unusable(f"{where} is {x:g}, not a finite number")
    if not low <= x <= high:
        raise Unusable(f"{where} = {x:g} is outside [{low:g}, {high:g}]")
    return x


def item_values(entry: Any, key: str, name: str = "the entry", bounds: tuple[float, float] = ANY) -> list[float] | None:
    """Per-item ``key`` values of an OU metric entry ``name``, in index order; None when the entry holds no
    ``value_by_index`` (nothing to recompute from). An item that is None, or whose value is None, is left out (OU
    leaves them out); a list per item (several answers) is averaged, as OU's ``aggregate_to_1D`` does. Anything
    else that is not a number in ``bounds`` raises :class:`Unusable`."""
    if not isinstance(entry, dict) or "value_by_index" not in entry:
        return None
    items = entry["value_by_index"]
    if not isinstance(items, dict):
        raise Unusable(f"{name}.value_by_index is {_kind_of(items)}, not an object of items")
    if not items:
        raise Unusable(f"{name}.value_by_index holds no items")
    out = []
    for index in sorted(items, key=lambda k: (len(str(k)), str(k))):
        item, where = items[index], f"{name} item {index}"
        if item is None:
            continue
        if not isinstance(item, dict):
            raise Unusable(f"{where} is {_kind_of(item)}, not an object")
        if key not in item:
            raise Unusable(f"{where} has no {key!r}")
        x = item[key]
        if x is None:
            continue
        if isinstance(x, list):
            if not x:
                raise Unusable(f"{where}: {key} is an empty list")
            out.append(float(np.mean([_number(v, f"{where}: {key}", *bounds) for v in x])))
        else:
            out.append(_number(x, f"{where}: {key}", *bounds))
    if not out:
        raise Unusable(f"{name}: no item holds a {key!r} value")
    return out


def _mean(values: list[float] | None) -> float | None:
    return None if values is None else float(np.mean(values))


def _auc(entry: Any, name: str = "the MIA entry") -> float | None:
    """AUROC of an OU MIA entry from its forget / holdout per-item scores; None if it holds neither,
    :class:`Unusable` if it holds one without the other (or unusable scores)."""
    if entry is None:
        return None
    if not isinstance(entry, dict):
        raise Unusable(f"{name} is {_kind_of(entry)}, not an object")
    forget = item_values(entry.get("forget"), "score", f"{name}.forget")
    holdout = item_values(entry.get("holdout"), "score", f"{name}.holdout")
    if forget is None and holdout is None:
        return None
    if forget is None or holdout is None:
        missing = "forget" if forget is None else "holdout"
        raise Unusable(f"{name} has no {missing} per-item scores (value_by_index) beside the "
                       f"{'holdout' if missing == 'forget' else 'forget'} ones")
    return mia.mia_auroc(forget, holdout)


def _probability_ratios(logs: dict[str, Any]) -> list[tuple[float, float]] | None:
    """Per-item ``(p_correct, p_wrong)`` of the forget truth ratio from the ``pre_compute`` entries OU caches in its
    EVAL file (``forget_Q_A_PARA_Prob``, ``forget_Q_A_PERT_Prob``: ``p = exp(-avg_loss)``, the wrong answers'
    losses averaged first, as OU does); None when they are not there (or not usable)."""
    para, pert = _items(logs.get("forget_Q_A_PARA_Prob")), _items(logs.get("forget_Q_A_PERT_Prob"))
    keys = sorted(set(para) & set(pert), key=lambda k: (len(str(k)), str(k)))
    out = []
    try:
        for k in keys:
            c = (para[k] or {}).get("avg_loss") if isinstance(para[k] or {}, dict) else None
            w = (pert[k] or {}).get("avg_loss") if isinstance(pert[k] or {}, dict) else None
            if c is None or w is None:
                continue
            c_loss = float(np.mean([_number(v, "avg_loss", *ANY) for v in (c if isinstance(c, list) else [c])]))
            w_loss = float(np.mean([_number(v, "avg_loss", *ANY) for v in (w if isinstance(w, list) else [w])]))
            out.append((math.exp(-c_loss), math.exp(-w_loss)))
    except (Unusable, OverflowError):
        return None
    return out or None


def _scores(logs: dict[str, Any], key: str = "forget_truth_ratio") -> list[float] | None:
    return item_values(logs.get(key), "score", key, RATIO)


def forget_truth_ratio_mode(logs: dict[str, Any]) -> str:
    """Which of OU's aggregations wrote ``forget_truth_ratio``: its per-item scores are ``p_w / p_c`` for
    ``closer_to_1_better`` and ``p_c / (p_c + p_w)`` for ``prob_mean``, told apart with the per-item probabilities
    OU caches beside them; ``closer_to_1_better`` (OU's default config) when those are not there."""
    try:
        scores = _scores(logs)
    except Unusable:
        scores = None
    probs = _probability_ratios(logs)
    if not scores or not probs or len(probs) != len(scores):
        return "closer_to_1_better"
    as_prob_mean = [c / (c + w + 1e-10) for c, w in probs]
    as_ratio = [w / (c + 1e-10) for c, w in probs]
    miss = lambda ref: max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(scores, ref))  # noqa: E731
    return "prob_mean" if miss(as_prob_mean) < miss(as_ratio) else "closer_to_1_better"


def forget_truth_ratios(logs: dict[str, Any]) -> list[float] | None:
    """OU's per-item forget truth ratios as ``R = p_wrong / p_correct`` whatever aggregation wrote them; None when
    the file holds none, :class:`Unusable` when they cannot be used."""
    scores = _scores(logs)
    if scores is not None and forget_truth_ratio_mode(logs) == "prob_mean":
        return [w / (c + 1e-10) for c, w in _probability_ratios(logs) or []]
    return scores


# --------------------------------------------------------------------------- the reference
@dataclass
class OuReference:
    """What Forget Quality and PrivLeak need from a retain run of either kind (None / NaN: the run lacks it)."""

    forget_truth_ratios: list[float] | None
    min_k_auc: float
    source: str
    path: str
    #: the per-item answer losses of its LOSS attack (``forget``, ``holdout``, item order): the reference MIA's
    losses: dict[str, list[float]] | None = None


def _digest(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _reference(path: str, bench: str, task: str, n_forget: int | None, run_eval: Path | None = None,
               run_ratios: list[float] | None = None) -> OuReference:
    """The reference run at ``path``: an OU folder, or an lm-eval output of ours (or a legacy TOFU log). The run
    itself (the same file, a copy of it, or the same per-item truth ratios) is refused as its own reference, and so
    is a reference that serves no metric."""
    from unlearn_tasks.reference_logs import ReferenceLogError

    if not Path(path).expanduser().exists():
        raise OuFolderError(f"the reference {path} does not exist; give the retain run's open-unlearning folder or "
                            "lm-eval output folder")
    check_one_kind(path, "the reference")
    files = ou_files(Path(path).expanduser())
    if bench in files and files[bench][0] is not None:
        file = files[bench][0]
        if run_eval is not None and (file.resolve() == run_eval.resolve() or _digest(file) == _digest(run_eval)):
            raise OuFolderError(f"the reference {file} is the open-unlearning run's own {file.name}: it would be its own "
                                "reference (Forget Quality 1.0). Pass the evaluation of the retain (retrained) model.")
        logs = read_json(file)
        if not isinstance(logs, dict):
            raise OuFolderError(f"the reference {file} is not an open-unlearning {bench} log (a JSON object)")
        try:
            ratios = forget_truth_ratios(logs) if bench == "TOFU" else None
            auc = _auc(logs.get("mia_min_k"), "mia_min_k")
        except Unusable as e:
            raise OuFolderError(f"the reference {file}: {e}; it cannot serve as a reference") from None
        if auc is None and _ou_value(logs.get("mia_min_k")) is not None:
            auc = _ou_value(logs["mia_min_k"])  # the reference's own AUC, as OU stored it
        if run_ratios and ratios == run_ratios:
            raise OuFolderError(f"the reference {file} holds the same per-item forget truth ratios as the run: it would "
                                "be its own reference. Pass the evaluation of the retain (retrained) model.")
        if not ratios and auc is None:
            needs = "per-item forget truth ratios (forget_truth_ratio.value_by_index) nor " if bench == "TOFU" else ""
            raise OuFolderError(f"the reference {file} holds neither {needs}a Min-K% AUC (mia_min_k), so nothing can be "
                                "recomputed against it; pass the retain run's complete open-unlearning folder")
        return OuReference(ratios or None, NAN if auc is None else auc, f"open-unlearning log {file}", str(file),
                           _losses(logs))
    try:
        if bench == "TOFU":
            from unlearn_tasks.tofu.reference import load_reference as load_tofu

            split = task.removeprefix("tofu_")
            if split == task:
                raise OuFolderError(f"cannot tell the forget split of the open-unlearning run to read the reference {path} "
                                    "for it; put forget01/forget05/forget10 in its folder name")
            ref = load_tofu(path, split, n_forget=n_forget)
            return OuReference(ref.forget_truth_ratios, ref.mia_auc.get("mia_min_k_auc", NAN), ref.source,
                               str(ref.path or path), ref.losses)
        from unlearn_tasks.muse.reference import load_reference as load_muse

        corpus = task.removeprefix("muse_")
        if corpus == task:
            raise OuFolderError(f"cannot tell the MUSE corpus of the open-unlearning run to read the reference {path} "
                                "for it; put News or Books in its folder name")
        ref = load_muse(path, corpus)
        return OuReference(None, ref.mia_auc.get("mia_min_k_auc", NAN), ref.source, str(ref.path or path), ref.losses)
    except (ReferenceLogError, FileNotFoundError) as e:
        raise OuFolderError(f"reference {path}: {e}") from None


# --------------------------------------------------------------------------- one benchmark's metrics
@dataclass
class OuTask:
    """One benchmark of an OU folder as our task: metrics, the disagreements found, the files read, and the values
    not recomputed: ``invalid`` (NaN: per-item values there but unusable, or a reference that cannot serve) and
    ``not_recomputed`` (OU's stored value shown: no per-item values to recompute it from), metric -> why."""

    task: str
    metrics: dict[str, float]
    notes: list[str] = field(default_factory=list)
    modes: dict[str, Any] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    reference: OuReference | None = None
    invalid: dict[str, str] = field(default_factory=dict)
    not_recomputed: dict[str, str] = field(default_factory=dict)


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


def _recompute(kind: str, entry: Any, logs: dict[str, Any], key: str) -> float | None:
    """The value of OU's metric ``key`` recomputed from its per-item values; None when there are none (the value is
    OU's alone), :class:`Unusable` when they are there but cannot be used."""
    bounds = KIND_RANGES.get(kind, ANY)
    if kind in ("prob", "rougeL_recall", "rougeL_f1", "score"):
        return _mean(item_values(entry, kind, key, bounds))
    if kind == "true_better":
        scores = item_values(entry, "score", key, bounds)
        return None if scores is None else truth_ratio_aggregate(scores, "true_better")
    if kind == "forget_truth_ratio":
        mode = forget_truth_ratio_mode(logs)
        scores = item_values(entry, "score", key, bounds)
        if scores is None:
            return None
        return _mean(scores) if mode == "prob_mean" else truth_ratio_aggregate(scores, mode, eps=1e-10)
    if kind == "auc":
        return _auc(entry, key)
    if kind == "model_utility":
        parts = []
        for part in UTILITY_PARTS:
            try:
                parts.append(_recompute(TOFU_NAMES[part][1], logs.get(part), logs, part))
            except Unusable as e:
                raise Unusable(f"its part {e}") from None
        return None if any(p is None for p in parts) else model_utility(parts)
    return None  # forget_quality, privleak: from a reference (see read_benchmark), else OU's value


def _ou_value(entry: Any) -> float | None:
    value = entry.get("agg_value") if isinstance(entry, dict) else entry
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _agree(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=1e-12)


def _against_reference(kind: str, logs: dict[str, Any], ref: OuReference, eval_file: Path | None,
                       folder: Path) -> float:
    """Forget Quality or PrivLeak of the run recomputed against ``ref``."""
    if kind == "forget_quality":
        if not ref.forget_truth_ratios:
            raise Unusable(f"the reference {ref.path} holds no per-item forget truth ratios")
        mine = forget_truth_ratios(logs)
        if not mine:
            raise OuFolderError(f"{eval_file}: no forget_truth_ratio.value_by_index to recompute Forget Quality "
                                f"against {ref.path}")
        if len(mine) != len(ref.forget_truth_ratios):
            raise OuFolderError(f"reference {ref.path} covers {len(ref.forget_truth_ratios)} forget items, the "
                                f"open-unlearning run {folder} {len(mine)}; pass the retain run of the same forget split")
        return forget_quality(mine, ref.forget_truth_ratios)
    auc = _auc(logs.get("mia_min_k"), "mia_min_k")
    if auc is None:
        raise Unusable("the run's mia_min_k has no per-item forget / holdout scores to recompute it against "
                       f"the reference {ref.path}")
    if math.isnan(ref.min_k_auc):
        raise Unusable(f"the reference {ref.path} holds no Min-K% AUC (mia_min_k)")
    return mia.privleak(auc, ref.min_k_auc)


def _losses(logs: dict[str, Any]) -> dict[str, list[float]] | None:
    """The per-item answer losses of an OU log's LOSS attack (``mia_loss``), None without them."""
    from unlearn_tasks.reference_logs import open_unlearning_losses

    try:
        return open_unlearning_losses(logs.get("mia_loss"))
    except (KeyError, TypeError, ValueError):
        return None


def _reference_mia(logs: dict[str, Any], ref: OuReference) -> float | None:
    """The reference MIA (``mia_reference_auc``) recomputed as our TOFU / MUSE tasks compute it: the AUROC of each
    item's answer loss minus the reference's (:func:`unlearn_tasks.tofu.aggregate.reference_mia_auc`); None when the
    run or the reference has no per-item losses."""
    mine = _losses(logs)
    if not mine or not ref.losses:
        return None
    if any(len(mine[s]) != len(ref.losses.get(s) or []) for s in ("forget", "holdout")):
        raise Unusable(f"the run's mia_loss and the reference {ref.path}'s hold different numbers of items")
    scores = {s: [a - b for a, b in zip(mine[s], ref.losses[s])] for s in ("forget", "holdout")}
    return mia.mia_auroc(scores["forget"], scores["holdout"])


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
        try:
            run_ratios = forget_truth_ratios(logs) if bench == "TOFU" else None
        except Unusable:
            run_ratios = None
        out.reference = _reference(str(reference), bench, task, _n_forget(logs), eval_file, run_ratios)
    ref = out.reference
    where = f"{bench}_EVAL.json" if eval_file else f"{bench}_SUMMARY.json"
    shown = [k for k in names if k in logs or k in summary]
    for key in shown:
        ours, kind = names[key]
        entry = logs.get(key)
        if kind == "forget_truth_ratio":
            out.modes["forget_truth_ratio"] = forget_truth_ratio_mode(logs)
        stored = [(source, theirs) for source, theirs in (("EVAL", _ou_value(entry)),
                                                          ("SUMMARY", _ou_value(summary.get(key))))
                  if theirs is not None]
        try:
            if kind in ("forget_quality", "privleak") and ref is not None:
                value = _against_reference(kind, logs, ref, eval_file, folder)
            elif key == "mia_reference" and ref is not None and ref.losses:
                value = _reference_mia(logs, ref)
                value = _recompute(kind, entry, logs, key) if value is None else value
            else:
                value = _recompute(kind, entry, logs, key)
        except Unusable as e:
            shown_as = f"; open-unlearning's stored value {stored[0][1]:.6g} is not used" if stored else ""
            out.invalid[ours] = f"{folder}/{where}: {e}{shown_as}"
            out.metrics[ours] = NAN
            continue
        if value is None:  # nothing to recompute it from: OU's value, marked as such
            if not stored:
                out.invalid[ours] = f"{folder}/{where}: {key} holds neither per-item values nor an agg_value"
                out.metrics[ours] = NAN
                continue
            value = stored[0][1]
            if kind in ("forget_quality", "privleak"):
                why = "no reference given; open-unlearning's value against its own retain_logs_path"
            else:
                why = f"{key} has no per-item values (value_by_index) in {bench}_EVAL.json"
            out.not_recomputed[ours] = why
            stored = stored[1:]
            recomputed = False
        else:
            recomputed = True
        for source, theirs in stored:
            if not _agree(value, theirs):
                against = f" against {ref.source}" if ref is not None and kind in ("forget_quality", "privleak") else ""
                basis = "recomputed from the per-item values" + against if recomputed else "in the EVAL file"
                out.notes.append(f"{folder}: {key} = {theirs:.6g} in {bench}_{source}.json, but {value:.6g} "
                                 f"{basis} (the table shows the {'recomputed' if recomputed else 'EVAL'} value)")
        out.metrics[ours] = value
    for key in summary:  # metrics OU was asked for that have no name of ours: kept under OU's name
        if key not in names and _ou_value(summary[key]) is not None:
            out.metrics[key] = _ou_value(summary[key])
            out.not_recomputed[key] = f"no metric of ours is named {key}; open-unlearning's SUMMARY value"
    return out


def check_one_kind(path: str | Path, what: str) -> None:
    """Refuse a folder that holds both an open-unlearning evaluation and lm-eval results at its top (which one is
    meant cannot be told), naming both and how to pick one."""
    path = Path(path).expanduser()
    if not path.is_dir() or not is_ou_folder(path):
        return
    ours = sorted(path.rglob("results_*.json"))
    if ours:
        ou = next(f for pair in ou_files(path).values() for f in pair if f is not None)
        raise OuFolderError(f"{what} {path} holds both an open-unlearning evaluation ({ou.name}) and lm-eval results "
                            f"({ours[0].relative_to(path)}); pass the one you mean: {ou} or {ours[0]}")


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


def task_notes(task: OuTask) -> list[str]:
    """Every note on an OU task's values, for the reports: disagreements with the recomputation, then the values
    not recomputed (shown as n/a, or as OU stored them)."""
    return [*task.notes,
            *(f"{task.task}/{m}: not recomputed: {why}; shown as n/a" for m, why in task.invalid.items()),
            *(f"{task.task}/{m}: not recomputed ({why}); open-unlearning's stored value is shown"
              for m, why in task.not_recomputed.items())]


def as_results(tasks: list[OuTask]) -> dict[str, Any]:
    """The OU run in lm-eval's results-file schema (``results.<task>.<metric>,none``, ``configs.<task>.provenance``),
    so that tools reading lm-eval output read it too; ``configs.<task>.<NOTES_KEY>`` keeps the notes and which
    values were not recomputed (``invalid``, ``not_recomputed``: metric -> why)."""
    return {"results": {t.task: {"alias": t.task, **{f"{m},none": v for m, v in t.metrics.items()}} for t in tasks},
            "configs": {t.task: {"task": t.task, "provenance": provenance(t),
                                 NOTES_KEY: {"files": t.files, "notes": task_notes(t), "invalid": t.invalid,
                                             "not_recomputed": t.not_recomputed}} for t in tasks}}
