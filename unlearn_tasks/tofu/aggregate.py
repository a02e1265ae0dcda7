"""Corpus-level TOFU metrics from the per-item records of :mod:`unlearn_tasks.tofu.scoring`."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from unlearn_tasks.metrics import mia
from unlearn_tasks.metrics.memorization import mean_score
from unlearn_tasks.metrics.tofu import (
    forget_quality,
    model_utility,
    truth_ratio_aggregate,
    truth_ratio_forget_stat,
    truth_ratio_retain_stat,
)
from unlearn_tasks.reference_logs import record_format

NAN = float("nan")
GENERATED_SETS = ("forget", "retain", "ra", "wf")
MIA_ATTACKS = ("loss", "zlib", "min_k", "min_k_plus_plus")
PRIVLEAK_ATTACK = "min_k"
#: The reference-based MIA (open-unlearning's ``mia_reference``): the model's answer loss minus the reference's.
REFERENCE_MIA = "mia_reference_auc"
#: The GradNorm MIA (open-unlearning's ``mia_gradnorm``): the answer loss's gradient norm, forget vs holdout.
GRADNORM_MIA = "mia_gradnorm_auc"
#: open-unlearning's gibberish metric: a classifier's mean class-0 probability of the forget generations.
GIBBERISH = "forget_gibberish"
#: Teacher-forced memorization metrics of the forget answers (open-unlearning's), means over the forget items.
MEMORIZATION = ("extraction_strength", "exact_memorization")
#: The 9 numbers whose harmonic mean is Model Utility.
UTILITY_METRICS = tuple(f"{s}_{m}" for s in ("retain", "ra", "wf") for m in ("prob", "rougeL_recall", "truth_ratio"))


@dataclass
class ReferenceData:
    """What Forget Quality and PrivLeak need from a retain model's evaluation."""

    forget_truth_ratios: list[float]
    forget_split: str | None = None
    mia_auc: dict[str, float] = field(default_factory=dict)
    question_keys: list[str] | None = None
    answer_scoring: str | None = None
    source: str = ""
    path: str | None = None  # the file read (recorded in the results as ``reference_file``)
    #: The reference model's per-item answer losses (the LOSS attack's scores) on ``forget`` and ``holdout``, in
    #: item order, for the reference-based MIA; None where the log has none (legacy TOFU, older runs).
    losses: dict[str, list[float]] | None = None


def metric_names(parts: list[str], gradnorm: bool = False, gibberish: bool = False,
                 reference_mia: bool = True) -> list[str]:
    """Metrics a TOFU task reports, given which parts (generation, likelihood) it runs and whether the GradNorm
    MIA, the gibberish classifier and the reference MIA were asked for."""
    names: list[str] = []
    if "generation" in parts:
        names += [f"{s}_rougeL_recall" for s in GENERATED_SETS]
    if "likelihood" in parts:
        names += [f"{s}_{m}" for s in GENERATED_SETS for m in ("prob", "truth_ratio")]
        names += ["forget_quality"] + [f"mia_{a}_auc" for a in MIA_ATTACKS] + ([REFERENCE_MIA] if reference_mia else [])
        names += ["privleak"]
        names += list(MEMORIZATION) + ([GRADNORM_MIA] if gradnorm else [])
    if "generation" in parts and gibberish:
        names.append(GIBBERISH)
    if set(parts) >= {"generation", "likelihood"}:
        names.append("model_utility")
    return names


def _values(records: list[dict], split: str, key: str) -> list[float]:
    return [r[key] for r in records if r["split"] == split and key in r]


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else NAN


def forget_truth_ratios(records: list[dict]) -> list[float]:
    """Per-item forget-set truth ratios in item order (what a reference log stores)."""
    forget = sorted((r for r in records if r["split"] == "forget" and "truth_ratio" in r), key=lambda r: r["index"])
    return [r["truth_ratio"] for r in forget]


def compute_metrics(records: list[dict], reference: ReferenceData | None,
                    aggregators: dict[str, str] | None = None) -> dict[str, float]:
    """Every TOFU metric that the records allow; NaN where a population or the reference is missing.
    ``aggregators``: the truth-ratio aggregation per set (open-unlearning's names; default TOFU's:
    ``closer_to_1_better`` on forget, ``true_better`` elsewhere). Forget Quality uses the per-item ratios
    whatever the aggregation (the KS test does not change under ``R -> 1 / (1 + R)``)."""
    out: dict[str, float] = {}
    for s in GENERATED_SETS:
        out[f"{s}_rougeL_recall"] = _mean(_values(records, s, "rougeL_recall"))
        out[f"{s}_prob"] = _mean(_values(records, s, "prob"))
        ratios = _values(records, s, "truth_ratio")
        if aggregators and s in aggregators:
            out[f"{s}_truth_ratio"] = truth_ratio_aggregate(ratios, aggregators[s]) if ratios else NAN
            continue
        stat = truth_ratio_forget_stat if s == "forget" else truth_ratio_retain_stat
        out[f"{s}_truth_ratio"] = stat(ratios) if ratios else NAN
    for attack in MIA_ATTACKS:
        key = f"mia_{attack}"
        out[f"{key}_auc"] = mia.mia_auroc(_values(records, "forget", key), _values(records, "holdout", key))
    for name in MEMORIZATION:  # items without a score (an empty answer's EM) are left out, as open-unlearning does
        out[name] = mean_score([r[name] for r in records if r["split"] == "forget" and name in r])
    out["model_utility"] = model_utility([out[m] for m in UTILITY_METRICS])
    out[REFERENCE_MIA] = reference_mia_auc(records, reference)
    out[GRADNORM_MIA] = mia.mia_auroc(_values(records, "forget", "mia_gradnorm"), _values(records, "holdout", "mia_gradnorm"))
    if reference is None:
        out["forget_quality"] = NAN
        out["privleak"] = NAN
    else:
        out["forget_quality"] = forget_quality(forget_truth_ratios(records), reference.forget_truth_ratios)
        ref_auc = reference.mia_auc.get(f"mia_{PRIVLEAK_ATTACK}_auc", NAN)
        auc = out[f"mia_{PRIVLEAK_ATTACK}_auc"]
        out["privleak"] = NAN if math.isnan(ref_auc) or math.isnan(auc) else mia.privleak(auc, ref_auc)
    return out


def item_losses(records: list[dict], split: str) -> list[float]:
    """Per-item answer losses (the LOSS attack's scores) of a population, in item order."""
    return [r["mia_loss"] for r in sorted((r for r in records if r["split"] == split and "mia_loss" in r),
                                          key=lambda r: r["index"])]


def reference_mia_auc(records: list[dict], reference: ReferenceData | None) -> float:
    """AUROC (forget = 0, holdout = 1) of ``loss - reference loss`` per item (Carlini et al.'s reference attack, as
    open-unlearning's ``mia_reference`` computes it, here from the reference run's logged losses instead of a
    second model); NaN without a reference that logged them or when the item counts differ."""
    if reference is None or not reference.losses:
        return NAN
    scores = {}
    for split in ("forget", "holdout"):
        mine, theirs = item_losses(records, split), list(reference.losses.get(split) or [])
        if not mine or len(mine) != len(theirs):
            return NAN
        scores[split] = [a - b for a, b in zip(mine, theirs)]
    return mia.mia_auroc(scores["forget"], scores["holdout"])


def reference_record(records: list[dict], metrics: dict[str, float], forget_split: str, options: dict[str, Any]) -> dict:
    """What this run contributes as a reference for others (written into lm-eval's results file)."""
    forget = sorted((r for r in records if r["split"] == "forget" and "truth_ratio" in r), key=lambda r: r["index"])
    return {
        "format": record_format("tofu"),
        "forget_split": forget_split,
        "n_forget": len(forget),
        "forget_truth_ratio": [r["truth_ratio"] for r in forget],
        "forget_question_keys": [r.get("qkey") for r in forget],
        "mia_auc": {f"mia_{a}_auc": metrics.get(f"mia_{a}_auc", NAN) for a in MIA_ATTACKS},
        "mia_loss": {split: item_losses(records, split) for split in ("forget", "holdout")},
        **options,
    }
