"""Every figure of the ``unlearn`` tools, in one module: TOFU's Forget Quality vs Model Utility scatter, grouped bars,
labelled scatters, the attack recovery dot plot, metrics against the step (evaluation during unlearning), the
KLoM margin histograms and the UDS per layer (``unlearn depth``). matplotlib is imported inside each function
(``unlearn --help`` stays light). A benchmark's own paper figure (WaterDrum's evaluation plot, deep unlearning's
Recall-Accuracy plot) stays in its benchmark package in ``unlearn_tasks``, below this layer, beside the report it belongs to."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


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


def pareto_scatter(points: dict[str, tuple[float, float, str]], front: list[str], out: str | Path, xlabel: str,
                   ylabel: str, modes: tuple[str, str] = ("max", "max"), title: str = "Forget vs utility") -> Path:
    """Every trial as a point ``points[id] = (x, y, group)`` coloured by group (method), the Pareto ``front`` joined
    by a line in order of x; ``modes`` say which way is better on each axis (written on the axes)."""
    plt, fig, ax = _figure(6.5, 4.6)
    groups = list(dict.fromkeys(g for _, _, g in points.values()))
    for group in groups:
        xy = [(x, y) for x, y, g in points.values() if g == group and _finite(x) and _finite(y)]
        if xy:
            ax.scatter(*zip(*xy), s=36, label=group, alpha=0.8)
    line = sorted((points[k][0], points[k][1]) for k in front if k in points)
    if line:
        ax.plot(*zip(*line), color="black", lw=1.2, ls="--", marker="o", mfc="none", ms=11, label="Pareto front")
    ax.set_xlabel(f"{xlabel} ({'higher' if modes[0] == 'max' else 'lower'} is better)")
    ax.set_ylabel(f"{ylabel} ({'higher' if modes[1] == 'max' else 'lower'} is better)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(plt, fig, out)


def _figure(width: float = 6.0, height: float = 4.0, rows: int = 1):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt, *plt.subplots(rows, 1, figsize=(width, height), dpi=110, sharex=True)


def _save(plt, fig, out: str | Path, metadata: dict[str, str] | None = None) -> Path:
    fig.tight_layout()
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", metadata=metadata)
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


#: Series of the recovery plot: (row field, legend label, marker, colour).
RECOVERY_SERIES = (("retain", "retain", "s", "tab:grey"), ("unlearned", "unlearned", "o", "tab:blue"),
                   ("after", "attacked", "D", "tab:red"), ("target", "target", "^", "tab:green"))


def recovery_dots(rows, out: str | Path, title: str = "Does the forgetting last?") -> dict:
    """Dot plot of attack recovery rows (:class:`unlearn_app.reports.attack_recovery.RecoveryRow`): one panel per metric, one
    line per attack with the retain / unlearned / attacked / target values, an arrow from unlearned to attacked and
    the recovery ratio written beside it. Missing values are left out.

    Returns what was drawn, read back from the figure's markers and labels
    (``{metric: {attack: {series: value, "recovery_label": text}}}``); it is also stored in the PNG as the text
    chunk ``recovery_data`` (JSON), so a reader can check the picture against the report."""
    import json

    metrics = list(dict.fromkeys(r.metric for r in rows))
    attacks = list(dict.fromkeys(r.attack for r in rows))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(metrics), 1, squeeze=False, dpi=110,
                             figsize=(7.0, 0.9 + len(metrics) * (0.55 * len(attacks) + 0.9)))
    axes = axes[:, 0]
    drawn: dict = {}
    for ax, metric in zip(axes, metrics):
        mine = {r.attack: r for r in rows if r.metric == metric}
        ys = {a: len(attacks) - 1 - i for i, a in enumerate(attacks)}  # first attack on top
        for key, label, marker, colour in RECOVERY_SERIES:
            pts = [(getattr(r, key), ys[a]) for a, r in mine.items() if _finite(getattr(r, key))]
            if pts:
                ax.scatter([x for x, _ in pts], [y for _, y in pts], marker=marker, color=colour, s=45, zorder=3,
                           label=label)
        for a, r in mine.items():
            if _finite(r.unlearned) and _finite(r.after):
                ax.annotate("", xy=(r.after, ys[a]), xytext=(r.unlearned, ys[a]),
                            arrowprops={"arrowstyle": "->", "color": "tab:red", "lw": 1.2})
            if r.recovery is not None and _finite(r.after):
                ax.annotate(f"recovery {r.recovery:.2f}", (r.after, ys[a]), textcoords="offset points",
                            xytext=(0, 7), ha="center", fontsize=8, gid="recovery")
        values = [getattr(r, k) for r in mine.values() for k, *_ in RECOVERY_SERIES if _finite(getattr(r, k))]
        if metric.endswith("forget_quality") and values and min(values) > 0:  # KS p-values span decades
            ax.set_xscale("log")
        ax.set_yticks(list(ys.values()), list(ys), fontsize=8)
        ax.set_ylim(-0.7, len(attacks) - 0.2)
        ax.set_title(metric, fontsize=9)
        ax.grid(axis="x", alpha=0.3)
        drawn[metric] = _read_back(ax, {y: a for a, y in ys.items()})
    axes[0].legend(fontsize=7, ncol=4, loc="lower left", bbox_to_anchor=(0, 1.15), frameon=False)
    fig.suptitle(title, fontsize=10)
    _save(plt, fig, out, metadata={"Title": title, "recovery_data": json.dumps(drawn)})
    return drawn


def _finite(v) -> bool:
    return v is not None and not math.isnan(v)


def _read_back(ax, attack_at: dict[int, str]) -> dict:
    """``{attack: {series: x, "recovery_label": text}}`` from an axes' markers and recovery labels."""
    labels = {label: key for key, label, _, _ in RECOVERY_SERIES}
    out: dict = {a: {} for a in attack_at.values()}
    for coll in ax.collections:
        for x, y in coll.get_offsets():
            out[attack_at[round(float(y))]][labels[coll.get_label()]] = float(x)
    for text in ax.texts:
        if text.get_gid() == "recovery":
            out[attack_at[round(float(text.xy[1]))]]["recovery_label"] = text.get_text()
    return out


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


def margin_histograms(unlearned: np.ndarray, oracle: np.ndarray, samples: list[int], values: np.ndarray,
                      path: str | Path) -> Path:
    """One panel per sample: both ensembles' margins (clipped to +/-100) on the 20 shared KLoM bins (matplotlib
    draws a value on the top edge in the last bar; KLoM drops it, as EasyDUB does)."""
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from unlearn_tasks.metrics.klom import CLIP, N_BINS, shared_edges

    fig, axes = plt.subplots(1, len(samples), figsize=(4 * len(samples), 3.2), squeeze=False)
    for ax, j in zip(axes[0], samples):
        u = np.clip(unlearned[:, j : j + 1], -CLIP, CLIP)
        o = np.clip(oracle[:, j : j + 1], -CLIP, CLIP)
        edges = shared_edges(u, o, N_BINS + 1)[:, 0]
        ax.hist(o[:, 0], bins=edges, alpha=0.6, label=f"oracle ({o.shape[0]})", color="tab:blue")
        ax.hist(u[:, 0], bins=edges, alpha=0.6, label=f"unlearned ({u.shape[0]})", color="tab:red")
        ax.set_title(f"sample {j}: KLoM {values[j]:.3g}")
        ax.set_xlabel("margin")
    axes[0][0].set_ylabel("models")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def depth_layers(rows: list[dict], uds: float | None, out: str | Path, title: str) -> Path:
    """``unlearn depth``'s figure, one x position per patched layer: above, the mean drop of the answer's
    log-probability with the retain model's (stage 1) and the unlearned model's (stage 2) states patched in; below,
    the layer's d1-weighted erasure ratio over the questions where it encodes the answer, with the overall UDS."""
    plt, fig, (top, bottom) = _figure(7.0, 5.2, rows=2)
    layers = [r["layer"] for r in rows]
    top.plot(layers, [r["mean_d1"] for r in rows], marker="o", label="stage 1: retain -> target")
    top.plot(layers, [r["mean_d2"] for r in rows], marker="s", label="stage 2: unlearned -> target")
    top.axhline(0, color="black", lw=0.6)
    top.set_ylabel("mean log-prob drop")
    top.legend(fontsize=8)
    top.grid(alpha=0.3)
    top.set_title(title)
    ratios = [r["weighted_ler"] for r in rows]
    bottom.bar(layers, [0 if v is None else v for v in ratios], color="tab:blue", alpha=0.8)
    if uds is not None:
        bottom.axhline(uds, color="tab:red", ls="--", lw=1.2, label=f"UDS {uds:.3f}")
        bottom.legend(fontsize=8)
    bottom.set_ylim(0, 1.05)
    bottom.set_ylabel("erasure ratio (KE layers)")
    bottom.set_xlabel("layer")
    from matplotlib.ticker import MaxNLocator

    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    bottom.grid(axis="y", alpha=0.3)
    return _save(plt, fig, out)
