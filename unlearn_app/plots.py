"""Plots people would rather look at than read: TOFU's Forget Quality vs Model Utility scatter."""

from __future__ import annotations

import math
from pathlib import Path


def forget_quality_vs_utility(models: dict[str, dict[str, float]], out: str | Path, title: str = "") -> Path:
    """Scatter of Model Utility (x) against Forget Quality (y, log scale), one labelled point per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4.2), dpi=120)
    for name, m in models.items():
        fq, mu = m.get("forget_quality", math.nan), m.get("model_utility", math.nan)
        if math.isnan(fq) or math.isnan(mu):
            continue
        fq = max(fq, 1e-30)
        ax.scatter([mu], [fq], s=50)
        ax.annotate(name, (mu, fq), textcoords="offset points", xytext=(5, 4), fontsize=9)
    ax.set_yscale("log")
    ax.set_xlabel("Model Utility (higher is better)")
    ax.set_ylabel("Forget Quality (KS p-value, higher is better)")
    ax.axhline(0.05, color="grey", lw=0.8, ls="--")
    ax.text(ax.get_xlim()[0], 0.05, " p = 0.05", va="bottom", fontsize=8, color="grey")
    ax.set_title(title or "TOFU: Forget Quality vs Model Utility")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out
