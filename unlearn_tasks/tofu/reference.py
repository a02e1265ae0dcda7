"""Reference (retain-model) logs for Forget Quality and PrivLeak, in the three formats users have:

* ``lm-eval-unlearning``: the output folder (or ``results_*.json``) of our own lm-eval run of the retain model;
  the TOFU task writes per-item forget truth ratios and MIA AUROCs into ``configs.<task>.unlearning_reference``;
* ``legacy``: legacy TOFU's ``eval_log_forget.json`` (per-item losses; truth ratios recomputed from them);
* ``open-unlearning``: open-unlearning's ``TOFU_EVAL.json`` (``forget_truth_ratio.value_by_index``, ``mia_min_k``).

A reference from another forget split (or a different item set) is refused with a message saying what to pass.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from unlearn_tasks.metrics.tofu import truth_ratio
from unlearn_tasks.tofu.aggregate import REFERENCE_FORMAT, ReferenceData
from unlearn_tasks.tofu.scoring import question_key
from unlearn_tasks.tofu.splits import FORGET_SIZES, LEGACY_CAP, forget_split_of_size

HOW_TO_MAKE = (
    "Produce one by evaluating the retain model (trained without the forget set) with the same task: "
    "`lm_eval --model hf --model_args pretrained=RETAIN_MODEL --tasks {task} --output_path REF_DIR`, then pass "
    "`--metadata '{{\"reference\": \"REF_DIR\"}}'` (a legacy TOFU eval_log_forget.json or an open-unlearning "
    "TOFU_EVAL.json also work)."
)


class ReferenceLogError(ValueError):
    """A reference log that cannot serve this evaluation; the message says why and what to pass instead."""


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
    return ReferenceData(ratios, None, auc, None, "tofu", f"open-unlearning log {source}")


def _ours(entries: list[dict], source: str, forget_split: str) -> ReferenceData:
    for entry in entries:
        if entry.get("forget_split") == forget_split:
            return ReferenceData(
                [float(x) for x in entry["forget_truth_ratio"]],
                forget_split,
                {k: float(v) for k, v in entry.get("mia_auc", {}).items() if v is not None},
                entry.get("forget_question_keys"),
                entry.get("answer_scoring"),
                f"lm-eval-unlearning results {source}",
            )
    found = sorted({e.get("forget_split") for e in entries})
    raise ReferenceLogError(
        f"Reference {source} holds TOFU results for {found}, not for {forget_split}. "
        f"Pass a reference evaluated on {forget_split}, or one per split: "
        f'--metadata \'{{"reference": {{"{forget_split}": "REF_DIR"}}}}\'.'
    )


def _our_entries(path: Path) -> list[tuple[dict, str]]:
    files = [path] if path.is_file() else sorted(path.rglob("results_*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    entries = []
    for f in files:
        try:
            data = json.loads(f.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        for cfg in (data.get("configs") or {}).values():
            if isinstance(cfg, dict) and isinstance(cfg.get("unlearning_reference"), dict):
                entries.append((cfg["unlearning_reference"], str(f)))
    return entries


TOFU_RECORD_FORMAT = REFERENCE_FORMAT


def load_reference(path: str | Path, forget_split: str, truth_ratio_mean: str = "geometric",
                   record_format: str = TOFU_RECORD_FORMAT) -> ReferenceData:
    """Read a reference log in any supported format for ``forget_split``; raise :class:`ReferenceLogError` if unusable.

    Our own results files are matched on ``record_format`` (another benchmark's reference reuses this mechanism with
    its own format, e.g. CLEAR's); only TOFU references may also be legacy or open-unlearning logs."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ReferenceLogError(f"Reference {path} does not exist.")
    ours = [(e, f) for e, f in _our_entries(path) if e.get("format", TOFU_RECORD_FORMAT) == record_format]
    if not ours and record_format != TOFU_RECORD_FORMAT:
        raise ReferenceLogError(
            f"Reference {path} holds no results of this benchmark ({record_format}); pass the output folder of the "
            f"same task run on the retain (gold) model."
        )
    if ours:
        ref = _ours([e for e, _ in ours], ours[0][1], forget_split)
    else:
        candidates = [path] if path.is_file() else [path / "eval_log_forget.json", path / "TOFU_EVAL.json"]
        file = next((c for c in candidates if c.is_file()), None)
        if file is None:
            raise ReferenceLogError(
                f"Reference {path} is neither our lm-eval output (results_*.json from a TOFU task), a legacy TOFU "
                f"eval_log_forget.json nor an open-unlearning TOFU_EVAL.json."
            )
        try:
            data = json.loads(file.read_text())
        except json.JSONDecodeError as e:
            raise ReferenceLogError(f"Reference {file} is not valid JSON ({e.msg}).") from None
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
        if forget_split not in splits:
            raise ReferenceLogError(
                f"Reference {file} covers {n} forget items, which is "
                f"{' or '.join(splits) if splits else 'no TOFU forget split'}; this task evaluates {forget_split} "
                f"({FORGET_SIZES[forget_split]} items). Pass the retain model's log for {forget_split}."
            )
        ref.forget_split = forget_split
    if any(math.isnan(x) for x in ref.forget_truth_ratios):
        raise ReferenceLogError(f"{ref.source}: the forget truth ratios contain NaN; re-run the reference evaluation.")
    return ref


def check_items(ref: ReferenceData, question_keys: list[str]) -> None:
    """Refuse a reference whose forget questions are not the ones evaluated (when both sides know them)."""
    if not ref.question_keys or not question_keys:
        return
    theirs = {k for k in ref.question_keys if k}
    if not theirs:
        return
    overlap = len(theirs & set(question_keys)) / len(theirs)
    if overlap < 0.9:
        raise ReferenceLogError(
            f"{ref.source}: only {overlap:.0%} of its forget questions are among this task's forget questions; "
            f"it comes from another split or dataset. Pass the retain model's log for the same forget split and data."
        )


def describe(ref: ReferenceData) -> dict[str, Any]:
    """A short summary for logs and reports."""
    return {
        "source": ref.source,
        "forget_split": ref.forget_split,
        "n_forget": len(ref.forget_truth_ratios),
        "median_truth_ratio": float(np.median(ref.forget_truth_ratios)) if ref.forget_truth_ratios else None,
        "mia_auc": ref.mia_auc,
        "legacy_cap": LEGACY_CAP,
    }
