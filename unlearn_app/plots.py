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


def _figure(width: float = 6.0, height: float = 4.0, rows: int = 1):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt, *plt.subplots(rows, 1, figsize=(width, height), dpi=110, sharex=True)


def _save(plt, fig, out: str | Path) -> Path:
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    plt.close(fig)
    return out


def grouped_bars(values: dict[str, dict[str, float]], out: str | Path, title: str, ylabel: str) -> Path:
    """Bars of ``values[label][run]``: one group per label (x), one bar per run; NaN bars are left out."""
    import numpy as np

    plt, fig, ax = _figure(max(5.5, 1.1 * len(values) + 2.5))
    labels = list(values)
    runs = list(dict.fromkeys(r for v in values.values() for r in v))
    width = 0.8 / max(len(runs), 1)
    x = np.arange(len(labels))
    for i, run in enumerate(runs):
        ys = [values[label].get(run, math.nan) for label in labels]
        ax.bar(x + (i - (len(runs) - 1) / 2) * width, [0 if math.isnan(y) else y for y in ys], width, label=run)
    ax.set_xticks(x, labels, rotation=20, ha="right", fontsize=8)
    ax.axhline(0, color="black", lw=0.6)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return _save(plt, fig, out)


def labelled_scatter(points: dict[str, tuple[float, float]], out: str | Path, title: str, xlabel: str,
                     ylabel: str) -> Path:
    """One labelled point per run at ``points[run] = (x, y)``; axes from 0 to 1."""
    plt, fig, ax = _figure(5.5, 4.2)
    for name, (x, y) in points.items():
        if math.isnan(x) or math.isnan(y):
            continue
        ax.scatter([x], [y], s=50)
        ax.annotate(name, (x, y), textcoords="offset points", xytext=(5, 4), fontsize=9)
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    return _save(plt, fig, out)


def metrics_vs_step(rows: list[dict[str, float]], out: str | Path, title: str,
                    selected_step: int | None = None) -> Path:
    """Each ``TASK/METRIC`` column of ``rows`` (one row per evaluation, with ``step``) against the step, one line
    per metric, NaN points left out, the selected step marked with a dashed vertical line. Metrics on a 0-1 scale
    and the others (PrivLeak in %, Truth Ratios above 1, ...) get separate panels, so neither flattens the other."""
    names = list(dict.fromkeys(k for r in rows for k in r if k not in ("step", "epoch")))
    series = {}
    for name in names:
        points = [(r["step"], r[name]) for r in rows if isinstance(r.get(name), (int, float)) and math.isfinite(r[name])]
        if points:
            series[name] = points
    unit = {n: p for n, p in series.items() if all(-0.05 <= y <= 1.05 for _, y in p)}
    other = {n: p for n, p in series.items() if n not in unit}
    panels = [(label, group) for label, group in (("0-1 scale", unit), ("other scales", other)) if group] or [("", {})]
    plt, fig, axes = _figure(9.0, 3.6 * len(panels), rows=len(panels))
    axes = list(axes) if len(panels) > 1 else [axes]
    for ax, (label, group) in zip(axes, panels):
        for name, points in group.items():
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", ms=3, lw=1.2, label=name)
        if selected_step is not None:
            ax.axvline(selected_step, color="black", lw=1.0, ls="--", label=f"selected: step {selected_step}")
        ax.set_ylabel(f"metric value ({label})" if label else "metric value")
        ax.grid(alpha=0.3)
        if group:
            ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    axes[-1].set_xlabel("optimizer step")
    axes[0].set_title(title, fontsize=10)
    return _save(plt, fig, out)
