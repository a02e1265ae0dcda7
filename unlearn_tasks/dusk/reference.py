"""The retrained model's AUROCs that DUSK's privleak and retain deviation are relative to (the release reads them
from its evaluation of ``AI-ISL/DUSK-retrain``), from:

* our own lm-eval run of the retrained model on ``dusk_privacy`` (``results_*.json`` or its output folder; the task
  writes its AUROCs under ``configs.dusk_privacy.unlearning_reference``), never the evaluated model's own run;
* the two numbers themselves: ``{"auc_forget_holdout": x, "auc_holdout_retain": y}`` (the release's convention).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unlearn_tasks.dusk.scoring import REFERENCE_AUCS
from unlearn_tasks.reference_logs import ReferenceLogError, find_records, is_benchmark, record_format

HOW_TO_MAKE = ("Produce one by evaluating the retrained model (trained without the forget style, e.g. "
               "AI-ISL/DUSK-retrain): `lm_eval --model hf --model_args pretrained=RETRAINED_MODEL --tasks dusk_privacy "
               "--output_path REF_DIR`, then pass `--metadata '{\"dusk_reference\": \"REF_DIR\"}'`.")


@dataclass
class DuskReference:
    auc: dict[str, float]
    source: str
    path: str | None = None


def _checked(values: dict[str, Any], where: str) -> dict[str, float]:
    out = {}
    for key in REFERENCE_AUCS:
        value = values.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or not 0 < value <= 1:
            raise ReferenceLogError(f"{where}: {key} must be an AUROC in (0, 1], got {value!r}.")
        out[key] = float(value)
    return out


def load_reference(given: str | dict[str, float], evaluated_model: dict | None = None) -> DuskReference:
    """The reference AUROCs; :class:`ReferenceLogError` saying what to pass when unusable."""
    if isinstance(given, dict):
        unknown = sorted(set(given) - set(REFERENCE_AUCS))
        if unknown:
            raise ReferenceLogError(f"dusk_reference: unknown key(s) {unknown}; give {list(REFERENCE_AUCS)}.")
        return DuskReference(_checked(given, "dusk_reference"), "given AUROCs")
    found = find_records(Path(str(given)), lambda r: is_benchmark(r, "dusk"), label="DUSK",
                        evaluated_model=evaluated_model)
    if not found:
        raise ReferenceLogError(f"Reference {given} holds no dusk_privacy results. {HOW_TO_MAKE}")
    return DuskReference(_checked(found[0].record.get("auc") or {}, f"Reference {found[0].file}"),
                         f"lm-eval-unlearning results {found[0].file}", found[0].file)


def reference_record(metrics: dict[str, float], model: dict, n: dict[str, int], mia_k: float, window: int) -> dict:
    """What a dusk_privacy run writes into lm-eval's results file for another run to use as its reference."""
    return {"format": record_format("dusk"), "auc": {k: metrics.get(k, math.nan) for k in REFERENCE_AUCS},
            "passages": n, "dusk_mia_k": mia_k, "dusk_mia_window": window, "model": model}
