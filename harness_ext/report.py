"""Side-by-side tables of several models' TOFU numbers, as Markdown, plain text and JSON."""

from __future__ import annotations

import math

#: The TOFU table's rows, in the order the literature reports them.
TOFU_ROWS = [
    ("forget_quality", "Forget Quality (KS p-value vs retain)"),
    ("model_utility", "Model Utility"),
    ("forget_rougeL_recall", "Forget ROUGE-L recall"),
    ("forget_prob", "Forget probability"),
    ("forget_truth_ratio", "Forget Truth Ratio"),
    ("retain_rougeL_recall", "Retain ROUGE-L recall"),
    ("retain_prob", "Retain probability"),
    ("retain_truth_ratio", "Retain Truth Ratio"),
    ("ra_rougeL_recall", "Real authors ROUGE-L recall"),
    ("ra_prob", "Real authors probability"),
    ("ra_truth_ratio", "Real authors Truth Ratio"),
    ("wf_rougeL_recall", "World facts ROUGE-L recall"),
    ("wf_prob", "World facts probability"),
    ("wf_truth_ratio", "World facts Truth Ratio"),
    ("mia_min_k_auc", "MIA Min-K% AUROC (forget vs holdout)"),
    ("mia_min_k_plus_plus_auc", "MIA Min-K%++ AUROC"),
    ("mia_loss_auc", "MIA LOSS AUROC"),
    ("mia_zlib_auc", "MIA zlib AUROC"),
    ("privleak", "PrivLeak (%, vs retain)"),
]


def _fmt(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e4):
        return f"{value:.2e}"
    return f"{value:.4f}"


def markdown_table(models: dict[str, dict[str, float]], rows: list[tuple[str, str]] = TOFU_ROWS) -> str:
    """One column per model, one row per metric present in at least one model."""
    names = list(models)
    lines = ["| metric | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
    for key, label in rows:
        if any(key in m for m in models.values()):
            lines.append(f"| {label} | " + " | ".join(_fmt(models[n].get(key)) for n in names) + " |")
    return "\n".join(lines)


def generic_rows(models: dict[str, dict[str, float]]) -> list[tuple[str, str]]:
    """Rows for any task: the TOFU order for TOFU metrics, then every other metric alphabetically."""
    known = {k for k, _ in TOFU_ROWS}
    present = {k for m in models.values() for k in m}
    return [r for r in TOFU_ROWS if r[0] in present] + [(k, k) for k in sorted(present - known)]


def compare_runs(runs: dict[str, dict[str, dict[str, float]]]) -> str:
    """Markdown: one table per task, one column per run (``{run: {task: {metric: value}}}``)."""
    tasks = sorted({t for r in runs.values() for t in r})
    parts = []
    for task in tasks:
        models = {name: r.get(task, {}) for name, r in runs.items()}
        parts.append(f"## {task}\n\n{markdown_table(models, generic_rows(models))}\n")
    return "\n".join(parts)
