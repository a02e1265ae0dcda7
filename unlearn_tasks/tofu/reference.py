"""Reference (retain-model) logs for Forget Quality and PrivLeak, in the three formats users have:

* ``lm-eval-unlearning``: the output folder (or ``results_*.json``) of our own lm-eval run of the retain model;
  the TOFU task writes per-item forget truth ratios and MIA AUROCs into ``configs.<task>.unlearning_reference``;
* ``legacy``: legacy TOFU's ``eval_log_forget.json`` (per-item losses; truth ratios recomputed from them);
* ``open-unlearning``: open-unlearning's ``TOFU_EVAL.json`` (``forget_truth_ratio.value_by_index``, ``mia_min_k``).

A reference from another forget split (or a different item set) is refused with a message saying what to pass.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from harness_ext.results import results_files
from unlearn_tasks.metrics.tofu import truth_ratio
from unlearn_tasks.reference_logs import ReferenceLogError, is_benchmark
from unlearn_tasks.tofu.aggregate import ReferenceData
from unlearn_tasks.tofu.scoring import question_key
from unlearn_tasks.tofu.splits import FORGET_SIZES, LEGACY_CAP, forget_split_of_size

HOW_TO_MAKE = (
    "Produce one by evaluating the retain model (trained without the forget set) with the same task: "
    "`lm_eval --model hf --model_args pretrained=RETAIN_MODEL --tasks {task} --output_path REF_DIR`, then pass "
    "`--metadata '{{\"reference\": \"REF_DIR\"}}'` (a legacy TOFU eval_log_forget.json or an open-unlearning "
    "TOFU_EVAL.json also work)."
)


log = logging.getLogger(__name__)

#: Model arguments (lm-eval ``--model_args``) that say which weights were evaluated.
IDENTITY_KEYS = ("pretrained", "peft", "revision", "delta")


#: Benchmarks whose reference records share results files with TOFU's and are never TOFU references.
OTHER_BENCHMARKS = ("muse", "clear")


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


# --------------------------------------------------------------------------- which model made a results file
def _fingerprint(path: str) -> str | None:
    """A cheap content fingerprint of a local model folder: names, sizes and 16 sampled 4 KiB blocks of each weight
    file (None for a Hub id). Two copies of the same weights agree; a retrained model does not."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        return None
    h = hashlib.sha256()
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in (".safetensors", ".bin", ".pt", ".pth"))
    for f in files:
        size = f.stat().st_size
        h.update(f"{f.name}:{size}".encode())
        with f.open("rb") as handle:
            for i in range(16):
                handle.seek(size * i // 16)
                h.update(handle.read(4096))
    return h.hexdigest() if files else None


def model_identity(model_args: dict[str, Any] | str | None) -> dict[str, Any]:
    """What identifies the evaluated weights in lm-eval model arguments (a dict, or the ``k=v,...`` string), with a
    content fingerprint of local folders."""
    if isinstance(model_args, str):
        model_args = dict(kv.split("=", 1) for kv in model_args.split(",") if "=" in kv)
    ident = {k: str(model_args[k]) for k in IDENTITY_KEYS if (model_args or {}).get(k)}
    for k in ("pretrained", "peft", "delta"):
        if k in ident and Path(ident[k]).expanduser().exists():
            ident[k] = str(Path(ident[k]).expanduser().resolve())
    prints = [_fingerprint(ident[k]) for k in ("pretrained", "peft", "delta") if k in ident]
    if prints and all(prints):
        ident["fingerprint"] = hashlib.sha256("|".join(prints).encode()).hexdigest()[:32]
    return ident


def same_model(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True if two identities name the same model: the same weights (content fingerprint), or the same model
    arguments (``pretrained``, ``peft``, ``revision``; a model retrained in place counts as the same model)."""
    if not a or not b:
        return False
    if a.get("fingerprint") and a.get("fingerprint") == b.get("fingerprint"):
        return True
    return all(a.get(k) == b.get(k) for k in IDENTITY_KEYS)


def _our_entries(path: Path, forget_split: str, evaluated: dict[str, Any] | None) -> list[tuple[dict, str]]:
    """The usable reference entries under ``path``, newest first, from one model only (see :func:`load_reference`)."""
    entries: list[tuple[dict, str, dict]] = []
    files = sorted(results_files(path), key=lambda p: p.name, reverse=True) if path.is_dir() and any(
        path.rglob("results_*.json")) else [path]
    for f in files:
        try:
            data = json.loads(f.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            if path.is_file():
                raise
            log.warning("reference: skipping %s (not valid JSON)", f)
            continue
        if not isinstance(data, dict):
            continue
        fallback = model_identity((data.get("config") or {}).get("model_args"))
        for cfg in (data.get("configs") or {}).values():
            if isinstance(cfg, dict) and isinstance(cfg.get("unlearning_reference"), dict):
                entry = cfg["unlearning_reference"]
                if any(is_benchmark(entry, b) for b in OTHER_BENCHMARKS):
                    continue
                entries.append((entry, str(f), entry.get("model") or fallback))
    if not entries:
        return []
    matching = [e for e in entries if e[0].get("forget_split") == forget_split] or entries
    if evaluated:
        own = [e for e in matching if same_model(e[2], evaluated)]
        matching = [e for e in matching if not same_model(e[2], evaluated)]
        if own and not matching:
            raise ReferenceLogError(
                f"Reference {own[0][1]} was produced by the model being evaluated ({_name(evaluated)}): it would be "
                f"its own reference (Forget Quality 1). Pass the retain model's evaluation."
            )
        for _, file, _ in own:
            log.warning("reference: ignoring %s, produced by the model being evaluated", file)
    models = []
    for _, file, ident in matching:
        if not any(same_model(ident, m) for m, _ in models):
            models.append((ident, file))
    if len(models) > 1:
        raise ReferenceLogError(
            f"Reference {path} holds TOFU results of {len(models)} different models "
            f"({'; '.join(f'{_name(m)} in {f}' for m, f in models)}). Pass the results file of the retain model."
        )
    return [(e, f) for e, f, _ in matching]


def _name(ident: dict[str, Any]) -> str:
    return ", ".join(f"{k}={ident[k]}" for k in IDENTITY_KEYS if k in ident) or "unknown model"


def load_reference(path: str | Path, forget_split: str, truth_ratio_mean: str = "geometric",
                   evaluated_model: dict[str, Any] | None = None, n_forget: int | None = None) -> ReferenceData:
    """Read a reference log in any supported format for ``forget_split``; raise :class:`ReferenceLogError` if unusable.

    In a folder of our results files the choice is deterministic: results of the evaluated model itself
    (``evaluated_model``, see :func:`model_identity`) are never used, results of several other models are refused
    (pass the file), and of one model's runs the newest by lm-eval's file-name timestamp is read."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ReferenceLogError(f"Reference {path} does not exist.")
    try:
        ours = _our_entries(path, forget_split, evaluated_model)
    except json.JSONDecodeError as e:
        raise ReferenceLogError(f"Reference {path} is not valid JSON ({e.msg}).") from None
    if ours:
        ref = _ours([e for e, _ in ours], ours[0][1], forget_split)
        ref.path = next(f for e, f in ours if e.get("forget_split") == forget_split)
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
