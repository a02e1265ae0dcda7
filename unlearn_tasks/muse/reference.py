"""The retrained model's MIA AUROCs that PrivLeak is relative to, from:

* our own lm-eval run of the retrained model on the same MUSE task (``results_*.json`` or its output folder;
  the task writes its AUROCs under ``configs.<task>.unlearning_reference``), the same mechanism as TOFU's;
* open-unlearning's ``MUSE_EVAL.json`` of the retrained model (``mia_min_k.agg_value``; same AUROC convention);
* ``"published"``: MUSE's published AUROCs of its retrained Llama-2-7B models (only meaningful for those models);
* a number: the Min-K% AUROC itself, in this package's convention (forget = 0, holdout = 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from unlearn_tasks.muse.corpora import PUBLISHED_RETRAIN_AUC
from unlearn_tasks.reference_logs import ReferenceLogError, is_benchmark, open_unlearning_losses, pick_record, read_log

HOW_TO_MAKE = (
    "Produce one by evaluating the retrained model (trained without the forget set, e.g. muse-bench/MUSE-{Corpus}_retrain) "
    "with the same task: `lm_eval --model hf --model_args pretrained=RETRAINED_MODEL --tasks {task} --output_path REF_DIR`, "
    "then pass `--metadata '{{\"reference\": \"REF_DIR\"}}'` (an open-unlearning MUSE_EVAL.json works too; "
    "\"published\" uses MUSE's published AUROCs of its Llama-2-7B retrained models)."
)


@dataclass
class MuseReference:
    mia_auc: dict[str, float] = field(default_factory=dict)
    source: str = ""
    mia_k: float | None = None
    path: str | None = None  # the file read (recorded in the results as ``reference_file``)
    #: The retrained model's per-passage PrivLeak losses (``forget``, ``holdout``, item order), for the reference
    #: MIA; None where the reference has none (a number, "published", an older run, an OU log without mia_loss).
    losses: dict[str, list[float]] | None = None


def _ours(path: Path, corpus: str, evaluated_model: dict | None) -> MuseReference | None:
    hint = (f"Pass the retrained model's run of this corpus, or one per corpus: "
            f'--metadata \'{{"reference": {{"{corpus}": "REF_DIR"}}}}\'.')
    found = pick_record(path, lambda r: is_benchmark(r, "muse"), "corpus", corpus, label="MUSE",
                        evaluated_model=evaluated_model, hint=hint)
    if found is None:
        return None
    auc = {k: float(v) for k, v in (found.record.get("mia_auc") or {}).items() if v is not None}
    losses = found.record.get("mia_loss") if isinstance(found.record.get("mia_loss"), dict) else None
    return MuseReference(auc, f"lm-eval-unlearning results {found.file}", found.record.get("mia_k"), found.file,
                         losses or None)


def _open_unlearning(path: Path) -> MuseReference:
    file, data = read_log(path, ("MUSE_EVAL.json",), "MUSE", "an open-unlearning MUSE_EVAL.json")
    auc = {}
    for attack in ("loss", "zlib", "min_k", "min_k_plus_plus"):
        entry = data.get(f"mia_{attack}") if isinstance(data, dict) else None
        if isinstance(entry, dict) and isinstance(entry.get("agg_value"), (int, float)):
            auc[f"mia_{attack}_auc"] = float(entry["agg_value"])
    if "mia_min_k_auc" not in auc:
        raise ReferenceLogError(f"Reference {file} has no mia_min_k.agg_value (the Min-K% AUROC PrivLeak needs).")
    losses = open_unlearning_losses(data.get("mia_loss"))
    return MuseReference(auc, f"open-unlearning log {file}", 0.4, str(file), losses)


def load_reference(reference: str | float, corpus: str, evaluated_model: dict | None = None) -> MuseReference:
    """The reference AUROCs for ``corpus``; raise :class:`ReferenceLogError` with what to pass if unusable. Our
    results files are read by :func:`unlearn_tasks.reference_logs.pick_record` (never the evaluated model's own)."""
    if isinstance(reference, bool):
        raise ReferenceLogError("reference must be a path, \"published\" or a number, not a boolean.")
    if isinstance(reference, (int, float)):
        if not 0 <= reference <= 1 or math.isnan(reference):
            raise ReferenceLogError(f"A numeric reference is the retrained model's Min-K% AUROC in [0, 1], got {reference}.")
        return MuseReference({"mia_min_k_auc": float(reference)}, f"given AUROC {reference}")
    if str(reference).strip().lower() == "published":
        return MuseReference(dict(PUBLISHED_RETRAIN_AUC[corpus]), f"MUSE's published retrained-model AUROCs ({corpus})", 0.4)
    path = Path(str(reference)).expanduser()
    return _ours(path, corpus, evaluated_model) or _open_unlearning(path)


def check_losses(ref: MuseReference | None, given: object, task: str, counts: dict[str, int]) -> None:
    """Refuse, for the reference MIA (``mia_reference: true``), a missing reference or one without per-passage
    losses for every PrivLeak passage evaluated (``counts``: forget / holdout), saying how to produce one."""
    losses = (ref.losses if ref else None) or {}
    if ref is None:
        why = "needs a reference run and none was given"
    elif not losses:
        why = f"needs per-passage losses and the reference {given} holds none"
    elif any(len(losses.get(s) or []) != n for s, n in counts.items()):
        why = (f"needs per-passage losses and the reference {given} logged {len(losses.get('forget') or [])} forget / "
               f"{len(losses.get('holdout') or [])} holdout for {counts['forget']} / {counts['holdout']} here")
    else:
        return
    raise ReferenceLogError(
        f"{task}: mia_reference_auc {why}: evaluate the retrained model with this version, without --limit "
        f"(`lm_eval --model hf --model_args pretrained=RETRAINED_MODEL --tasks {task} --output_path REF_DIR` logs them "
        f"in configs.{task}.unlearning_reference.mia_loss; open-unlearning: its MUSE_EVAL.json with mia_loss) and pass "
        f"--metadata '{{\"reference\": \"REF_DIR\"}}', or leave mia_reference out."
    )
