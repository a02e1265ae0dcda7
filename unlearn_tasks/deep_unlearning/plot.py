"""Recall-Accuracy plot of a hyperparameter sweep (PNG via matplotlib's Agg canvas; pyplot is not touched)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .metrics import DEFAULT_THRESHOLD, frontier, sweep_summary

ScoreDicts = Sequence[Mapping[str, Any]]


def plot_recall_accuracy(
    series: Mapping[str, ScoreDicts] | ScoreDicts,
    path: str | Path,
    *,
    accuracy_key: str = "acc_all",
    threshold: float = DEFAULT_THRESHOLD,
    title: str = "Deep unlearning: Recall vs Accuracy",
) -> Path:
    """Write a PNG: every sweep point, and per series the target-averaged frontier max{acc : recall >= r}.

    ``series`` maps a label (e.g. a method) to its :func:`~.metrics.score` dicts, or is one list of them.
    The legend gives each series' AR-AUC; dashed lines mark the threshold on both axes.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if not isinstance(series, Mapping):
        series = {"sweep": series}
    grid = np.linspace(0.0, 1.0, 201)
    figure = Figure(figsize=(5.5, 4.5))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for index, (label, scores) in enumerate(series.items()):
        color = f"C{index % 10}"
        by_target: dict[int, list[tuple[float, float]]] = defaultdict(list)
        for item in scores:
            by_target[int(item["target"])].append((float(item["recall"]), float(item[accuracy_key])))
        if not by_target:
            continue
        points = np.array([p for pts in by_target.values() for p in pts])
        axes.scatter(points[:, 0], points[:, 1], s=10, alpha=0.35, color=color)
        mean_curve = np.mean([frontier(pts, grid) for pts in by_target.values()], axis=0)
        auc = sweep_summary(scores, threshold, accuracy_key)["ar_auc"]
        axes.step(grid, mean_curve, where="post", color=color, label=f"{label} (AR-AUC {auc:.3f})")
    axes.axhline(threshold, color="grey", linestyle="--", linewidth=0.8)
    axes.axvline(threshold, color="grey", linestyle="--", linewidth=0.8)
    axes.set(xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), xlabel="Recall", ylabel=f"Accuracy ({accuracy_key})", title=title)
    axes.legend(loc="lower left", fontsize=8)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    return path
