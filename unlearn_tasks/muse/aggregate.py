"""Corpus-level MUSE metrics from the per-document records of :mod:`unlearn_tasks.muse.scoring`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from unlearn_tasks.metrics import mia
from unlearn_tasks.metrics.memorization import mean_score
from unlearn_tasks.reference_logs import record_format

NAN = float("nan")
MIA_ATTACKS = ("loss", "zlib", "min_k", "min_k_plus_plus")
PRIVLEAK_ATTACK = "min_k"
ROUGE_METRICS = {"forget_verbmem": "verbmem_forget", "forget_knowmem": "knowmem_forget",
                 "retain_knowmem": "knowmem_retain"}
#: open-unlearning's teacher-forced memorization metrics of the forget VerbMem passages.
MEMORIZATION = ("extraction_strength", "exact_memorization")
#: open-unlearning's optional MIAs on the PrivLeak passages and its gibberish metric (its MUSE metric names:
#: ``mia_gradnorm``, ``mia_reference``, ``forget_gibberish``).
GRADNORM_MIA = "mia_gradnorm_auc"
REFERENCE_MIA = "mia_reference_auc"
GIBBERISH = "forget_gibberish"
PASSAGE_SETS = ("privleak_forget", "privleak_holdout")


def metric_names(parts: list[str], gradnorm: bool = False, reference_mia: bool = False,
                 gibberish: bool = False) -> list[str]:
    """Metrics a MUSE task reports, given its parts and which of open-unlearning's optional metrics were asked for."""
    names = []
    if "verbmem" in parts:
        names += ["forget_verbmem", *MEMORIZATION] + ([GIBBERISH] if gibberish else [])
    if "knowmem" in parts:
        names += ["forget_knowmem", "retain_knowmem"]
    if "privleak" in parts:
        names += [f"mia_{a}_auc" for a in MIA_ATTACKS] + ["privleak"]
        names += ([GRADNORM_MIA] if gradnorm else []) + ([REFERENCE_MIA] if reference_mia else [])
    return names


def item_losses(records: list[dict], set_name: str) -> list[float]:
    """Per-passage losses (the LOSS attack's scores) of a PrivLeak set, in item order."""
    return [r["mia_loss"] for r in sorted((r for r in records if r["set"] == set_name and "mia_loss" in r),
                                          key=lambda r: r["index"])]


def reference_mia_auc(records: list[dict], reference_losses: dict[str, list[float]] | None) -> float:
    """AUROC (forget = 0, holdout = 1) of ``loss - reference loss`` per PrivLeak passage (open-unlearning's
    ``mia_reference``, from the reference run's logged losses); NaN without them or when the counts differ."""
    if not reference_losses:
        return NAN
    scores = {}
    for set_name, split in zip(PASSAGE_SETS, ("forget", "holdout")):
        mine, theirs = item_losses(records, set_name), list(reference_losses.get(split) or [])
        if not mine or len(mine) != len(theirs):
            return NAN
        scores[split] = [a - b for a, b in zip(mine, theirs)]
    return mia.mia_auroc(scores["forget"], scores["holdout"])


def _values(records: list[dict], set_name: str, key: str) -> list[float]:
    return [r[key] for r in records if r["set"] == set_name and key in r]


def compute_metrics(records: list[dict], parts: list[str], reference_auc: dict[str, float] | None,
                    reference_losses: dict[str, list[float]] | None = None, gradnorm: bool = False,
                    reference_mia: bool = False) -> dict[str, float]:
    """Every metric of ``parts``: mean ROUGE-L F1 per set, MIA AUROCs (forget vs holdout), PrivLeak vs the reference,
    and the GradNorm / reference MIAs when asked for (gibberish: the task's, it runs the classifier)."""
    out: dict[str, float] = {}
    for metric, set_name in ROUGE_METRICS.items():
        values = _values(records, set_name, "rougeL_f1")
        out[metric] = float(np.mean(values)) if values else NAN
    for name in MEMORIZATION:  # open-unlearning's, on the forget VerbMem passages (Nones left out)
        out[name] = mean_score([r[name] for r in records if r["set"] == "verbmem_forget" and name in r])
    for attack in MIA_ATTACKS:
        key = f"mia_{attack}"
        out[f"{key}_auc"] = mia.mia_auroc(_values(records, "privleak_forget", key), _values(records, "privleak_holdout", key))
    ref = (reference_auc or {}).get(f"mia_{PRIVLEAK_ATTACK}_auc", NAN)
    auc = out[f"mia_{PRIVLEAK_ATTACK}_auc"]
    out["privleak"] = NAN if math.isnan(ref) or math.isnan(auc) else mia.privleak(auc, ref)
    out[GRADNORM_MIA] = mia.mia_auroc(_values(records, "privleak_forget", "mia_gradnorm"),
                                      _values(records, "privleak_holdout", "mia_gradnorm"))
    out[REFERENCE_MIA] = reference_mia_auc(records, reference_losses)
    return {m: out[m] for m in metric_names(parts, gradnorm, reference_mia)}


def reference_record(records: list[dict], metrics: dict[str, float], corpus: str, options: dict[str, Any]) -> dict:
    """What this run contributes as the reference of another (written into lm-eval's results file)."""
    return {
        "format": record_format("muse"),
        "corpus": corpus,
        "n_forget": len(_values(records, "privleak_forget", "mia_min_k")),
        "n_holdout": len(_values(records, "privleak_holdout", "mia_min_k")),
        "mia_auc": {f"mia_{a}_auc": metrics.get(f"mia_{a}_auc", NAN) for a in MIA_ATTACKS},
        "mia_loss": {split: item_losses(records, s) for s, split in zip(PASSAGE_SETS, ("forget", "holdout"))},
        **options,
    }
