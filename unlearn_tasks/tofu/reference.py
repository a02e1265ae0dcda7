"""Reference (retain-model) logs for Forget Quality and PrivLeak, in the three formats users have:

* ``lm-eval-unlearning``: the output folder (or ``results_*.json``) of our own lm-eval run of the retain model;
  the TOFU task writes per-item forget truth ratios and MIA AUROCs into ``configs.<task>.unlearning_reference``;
* ``legacy``: legacy TOFU's ``eval_log_forget.json`` (per-item losses; truth ratios recomputed from them);
* ``open-unlearning``: open-unlearning's ``TOFU_EVAL.json`` (``forget_truth_ratio.value_by_index``, ``mia_min_k``).

A reference from another forget split (or a different item set) is refused with a message saying what to pass.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from unlearn_tasks.metrics.tofu import truth_ratio
from unlearn_tasks.reference_logs import (  # noqa: F401  (model_identity, same_model: TOFU's public names)
    ReferenceLogError,
    is_benchmark,
    model_identity,
    open_unlearning_losses,
    pick_record,
    read_log,
    same_model,
)
from unlearn_tasks.tofu.aggregate import ReferenceData
from unlearn_tasks.tofu.scoring import question_key
from unlearn_tasks.tofu.splits import FORGET_SIZES, LEGACY_CAP, forget_split_of_size

HOW_TO_MAKE = (
    "Produce one by evaluating the retain model (trained without the forget set) with the same task: "
    "`lm_eval --model hf --model_args pretrained=RETAIN_MODEL --tasks {task} --output_path REF_DIR`, then pass "
    "`--metadata '{{\"reference\": \"REF_DIR\"}}'` (a legacy TOFU eval_log_forget.json or an open-unlearning "
    "TOFU_EVAL.json also work)."
)

#: Benchmarks whose reference records share results files with TOFU's and are never TOFU references (TOFU's own
#: records from before the ``format`` tag carry none, so TOFU accepts every record but these).
OTHER_BENCHMARKS = ("muse", "clear")


def is_tofu_record(record: dict) -> bool:
    return not any(is_benchmark(record, b) for b in OTHER_BENCHMARKS)


def _legacy(data: dict, source: str, truth_ratio_mean: str) -> ReferenceData:
    para = data["avg_paraphrased_loss"]
    pert = data["average_perturb_loss"]
    keys = sorted(para, key=int)
    ratios = [truth_ratio(-para[k], [-x for x in pert[k]], truth_ratio_mean) for k in keys]
    questions = None
    generated = data.get("generated_text")
    if isinstance(generated, dict):
        questions = []
        for k in keys:
            entry = generated.get(k)
            text = entry[0] if isinstance(entry, list) and entry else ""
            q = text.split("Question:", 1)[-1].split("[/INST]", 1)[0].replace("[INST]", "").strip()
            questions.append(question_key(q) if q else None)
    return ReferenceData(ratios, None, {}, questions, "tofu", f"legacy TOFU log {source}")


def _open_unlearning(data: dict, source: str) -> ReferenceData:
    by_index = data["forget_truth_ratio"].get("value_by_index") or {}
    if not by_index:
        raise ReferenceLogError(f"{source}: forget_truth_ratio.value_by_index is empty; the retain run logged no items.")
    ratios = []
    for k in sorted(by_index, key=lambda x: int(x)):
        v = by_index[k]
        ratios.append(float(v.get("score", v.get("value")) if isinstance(v, dict) else v))
    auc = {}
    mink = data.get("mia_min_k")
    if isinstance(mink, dict) and "agg_value" in mink:
        auc["mia_min_k_auc"] = float(mink["agg_value"])
    return ReferenceData(ratios, None, auc, None, "tofu", f"open-unlearning log {source}",
                         losses=open_unlearning_losses(data.get("mia_loss")))


def _ours(entry: dict, source: str) -> ReferenceData:
    return ReferenceData(
        [float(x) for x in entry["forget_truth_ratio"]],
        entry["forget_split"],
        {k: float(v) for k, v in entry.get("mia_auc", {}).items() if v is not None},
        entry.get("forget_question_keys"),
        entry.get("answer_scoring"),
        f"lm-eval-unlearning results {source}",
        path=source,
        losses=entry.get("mia_loss") if isinstance(entry.get("mia_loss"), dict) else None,
    )


def load_reference(path: str | Path, forget_split: str, truth_ratio_mean: str = "geometric",
                   evaluated_model: dict[str, Any] | None = None, n_forget: int | None = None) -> ReferenceData:
    """Read a reference log in any supported format for ``forget_split``; raise :class:`ReferenceLogError` if unusable.

    In a folder of our results files the choice is deterministic: results of the evaluated model itself
    (``evaluated_model``, see :func:`model_identity`) are never used, results of several other models are refused
    (pass the file), and of one model's runs the newest by lm-eval's file-name timestamp is read."""
    path = Path(path).expanduser()
    hint = (f"Pass a reference evaluated on {forget_split}, or one per split: "
            f'--metadata \'{{"reference": {{"{forget_split}": "REF_DIR"}}}}\'.')
    ours = pick_record(path, is_tofu_record, "forget_split", forget_split, label="TOFU",
                       evaluated_model=evaluated_model, hint=hint)
    if ours:
        ref = _ours(ours.record, ours.file)
    else:
        file, data = read_log(path, ("eval_log_forget.json", "TOFU_EVAL.json"), "TOFU",
                              "a legacy TOFU eval_log_forget.json nor an open-unlearning TOFU_EVAL.json")
        if "avg_paraphrased_loss" in data and "average_perturb_loss" in data:
            ref = _legacy(data, str(file), truth_ratio_mean)
        elif isinstance(data.get("forget_truth_ratio"), dict):
            ref = _open_unlearning(data, str(file))
        else:
            raise ReferenceLogError(
                f"Reference {file} has neither legacy TOFU fields (avg_paraphrased_loss, average_perturb_loss) nor "
                f"open-unlearning's forget_truth_ratio; it cannot give per-item forget truth ratios."
            )
        n = len(ref.forget_truth_ratios)
        splits = forget_split_of_size(n)
        if forget_split not in splits and n != n_forget:
            raise ReferenceLogError(
                f"Reference {file} covers {n} forget items, which is "
                f"{' or '.join(splits) if splits else 'no TOFU forget split'}; this task evaluates {forget_split} "
                f"({FORGET_SIZES[forget_split]} items). Pass the retain model's log for {forget_split}."
            )
        ref.forget_split = forget_split
        ref.path = str(file)
    if any(math.isnan(x) for x in ref.forget_truth_ratios):
        raise ReferenceLogError(f"{ref.source}: the forget truth ratios contain NaN; re-run the reference evaluation.")
    return ref


def check_items(ref: ReferenceData, question_keys: list[str]) -> None:
    """Refuse a reference whose forget items are not the ones evaluated: other questions (another split or data),
    or a different number of items (e.g. a reference made with ``--limit`` or ``max_items_per_split``). Legacy TOFU
    logs, which keep only the first 300 items, are accepted for the larger splits."""
    n_ref, n_ours = len(ref.forget_truth_ratios), len(question_keys)
    capped = ref.source.startswith("legacy") and n_ref == LEGACY_CAP < n_ours
    theirs = [k for k in (ref.question_keys or []) if k]
    if theirs and question_keys:
        overlap = len(set(theirs) & set(question_keys)) / len(set(theirs))
        if overlap < 0.9:
            raise ReferenceLogError(
                f"{ref.source}: only {overlap:.0%} of its forget questions are among this task's forget questions; "
                f"it comes from another split or dataset. Pass the retain model's log for the same forget split and data."
            )
    if not question_keys or capped:
        return
    missing = len(set(question_keys) - set(theirs)) if theirs else 0
    if n_ref != n_ours or missing:
        raise ReferenceLogError(
            f"{ref.source}: the reference covers {n_ref} forget items, this evaluation {n_ours}"
            + (f" ({missing} of them are not in the reference)" if missing else "")
            + ". Forget Quality compares the same items: make the reference without --limit and with the same "
            "max_items_per_split and data as this evaluation."
        )


def describe(ref: ReferenceData) -> dict[str, Any]:
    """A short summary for logs and reports."""
    return {
        "source": ref.source,
        "path": ref.path,
        "forget_split": ref.forget_split,
        "n_forget": len(ref.forget_truth_ratios),
        "median_truth_ratio": float(np.median(ref.forget_truth_ratios)) if ref.forget_truth_ratios else None,
        "mia_auc": ref.mia_auc,
        "legacy_cap": LEGACY_CAP,
    }


def check_losses(ref: ReferenceData, path: str, task: str, n_holdout: int) -> None:
    """Refuse, for the reference MIA, a reference without per-item answer losses for every forget and holdout item
    (a legacy TOFU log, an open-unlearning log without ``mia_loss``, a run of an earlier version, a ``--limit`` run),
    saying how to produce one or how to go without the metric."""
    losses = ref.losses or {}
    if not losses:
        why = "holds no per-item answer losses"
    elif len(losses.get("forget") or []) != len(ref.forget_truth_ratios) or len(losses.get("holdout") or []) != n_holdout:
        why = (f"logged {len(losses.get('forget') or [])} forget / {len(losses.get('holdout') or [])} holdout losses "
               f"for {len(ref.forget_truth_ratios)} / {n_holdout} items here")
    else:
        return
    raise ReferenceLogError(
        f"{task}: the reference {path} {why}, which mia_reference_auc needs: re-evaluate the retain model with this "
        f"version, without --limit (`lm_eval --model hf --model_args pretrained=RETAIN_MODEL --tasks {task} "
        f"--output_path REF_DIR` logs them in configs.{task}.unlearning_reference.mia_loss; open-unlearning: its "
        f"TOFU_EVAL.json with mia_loss), or pass --metadata '{{\"mia_reference\": false}}' to go without it."
    )
