"""WaterDrum meta-evaluation: strengths per owner, scaling, D1 separability, D2 calibration, the plot.

* Strength of an owner in a model = mean, over the owner's queries, of the query's score under the
  owner's id; a query's score pools its generations weighted by counted tokens.
* Scaling: divide by the original model's strength (original = 1), or min-max between the retrained
  model (0) and the original (1).
* D1 separability: AUROC between forget-owner scores (label 0) and retain-owner scores (label 1).
* D2 calibration: fit ``strength = m * r`` through the origin, r = fraction of the forget data still
  trained; ``R^2 = 1 - SS_res / SS_tot`` with the centred total sum of squares (may be negative).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SCALINGS = ("original", "minmax", "none")


def _finite_1d(values: Iterable[float], what: str) -> np.ndarray:
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=np.float64).ravel()
    if arr.size == 0:
        raise ValueError(f"{what} is empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what} contains NaN or infinite values")
    return arr


def pool_generations(scores: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Length-weighted mean over generations: ``[queries, gens, ids]`` and ``[queries, gens]`` -> ``[queries, ids]``.

    Equals scoring all counted tokens of a query's generations together; 0 where nothing was counted.
    """
    scores = np.asarray(scores, dtype=np.float64)
    lengths = np.asarray(lengths, dtype=np.float64)
    if scores.ndim != 3 or lengths.shape != scores.shape[:2]:
        raise ValueError("need scores [queries, gens, ids] and lengths [queries, gens]")
    if np.any(lengths < 0):
        raise ValueError("lengths must be >= 0")
    total = lengths.sum(axis=1)
    weighted = np.einsum("qg,qgi->qi", lengths, scores)
    return weighted / np.maximum(total, 1e-300)[:, None] * (total > 0)[:, None]


def owner_strengths(query_scores: np.ndarray, query_owner: Sequence[int], ids: Sequence[int]) -> dict[int, float]:
    """Strength per owner: mean of ``query_scores[q, ids.index(owner of q)]`` over the owner's queries."""
    query_scores = np.asarray(query_scores, dtype=np.float64)
    ids = [int(i) for i in ids]
    owners = np.asarray(query_owner, dtype=np.int64)
    if query_scores.shape != (len(owners), len(ids)):
        raise ValueError("query_scores must be [queries, ids] with one owner per query")
    out: dict[int, float] = {}
    for owner in dict.fromkeys(owners.tolist()):
        if owner not in ids:
            raise ValueError(f"owner {owner} is not among the verified ids")
        out[int(owner)] = float(query_scores[owners == owner, ids.index(owner)].mean())
    return out


def scale_by_original(values: Iterable[float], original: float) -> np.ndarray:
    """``values / original`` (original model = 1)."""
    if not math.isfinite(original) or original == 0:
        raise ValueError(f"cannot scale by an original strength of {original}")
    return np.asarray(list(values), dtype=np.float64) / original


def minmax_scale(values: Iterable[float], original: float, retrained: float) -> np.ndarray:
    """``(values - retrained) / (original - retrained)`` (original = 1, retrained = 0)."""
    if not (math.isfinite(original) and math.isfinite(retrained)) or original == retrained:
        raise ValueError("min-max scaling needs distinct, finite original and retrained strengths")
    return (np.asarray(list(values), dtype=np.float64) - retrained) / (original - retrained)


def auroc(forget_scores: Iterable[float], retain_scores: Iterable[float]) -> float:
    """D1: area under the ROC curve separating retain (positive) from forget scores; ties count 1/2.

    1 = every retain score above every forget score (the forget owner's watermark is gone), 0.5 = chance.
    """
    from scipy.stats import rankdata  # imported where used: scipy.stats takes about half a second to import

    neg = _finite_1d(forget_scores, "forget_scores")
    pos = _finite_1d(retain_scores, "retain_scores")
    ranks = rankdata(np.concatenate([pos, neg]))
    u = ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2
    return float(u / (len(pos) * len(neg)))


@dataclass(frozen=True)
class CalibrationFit:
    """Least-squares line ``y = slope * r`` through the origin and its R^2 (NaN if y is constant)."""

    slope: float
    r2: float
    n: int


def calibration_fit(fraction_trained: Iterable[float], strengths: Iterable[float]) -> CalibrationFit:
    """D2: fit ``strength = m * r`` (r = fraction of forget data still trained) and score it by R^2."""
    r = _finite_1d(fraction_trained, "fraction_trained")
    y = _finite_1d(strengths, "strengths")
    if r.shape != y.shape:
        raise ValueError("fraction_trained and strengths differ in length")
    if len(r) < 2:
        raise ValueError("calibration needs at least two models")
    if np.any(r < 0):
        raise ValueError("fraction_trained must be >= 0")
    denom = float(np.dot(r, r))
    if denom == 0:
        raise ValueError("calibration needs a model with some forget data still trained")
    slope = float(np.dot(r, y) / denom)
    ss_res = float(np.sum((y - slope * r) ** 2))
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else float("nan")
    return CalibrationFit(slope, r2, len(r))


@dataclass
class ModelRun:
    """One evaluated model: its forget-owner and retain-owner strengths (unscaled).

    ``role`` marks the ``"original"`` model (trained on everything) and the ``"retrained"`` one (forget data
    never seen); ``fraction_trained`` (0..1) places a model on the D2 calibration series; the optional
    per-generation score lists feed D1.
    """

    name: str
    forget: float
    retain: float
    role: str | None = None
    fraction_trained: float | None = None
    forget_scores: list[float] | None = field(default=None, repr=False)
    retain_scores: list[float] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.role not in (None, "original", "retrained"):
            raise ValueError(f"role must be 'original', 'retrained' or None, got {self.role!r}")
        if not (math.isfinite(self.forget) and math.isfinite(self.retain)):
            raise ValueError(f"run {self.name!r}: strengths must be finite")
        if self.fraction_trained is not None and not 0 <= self.fraction_trained <= 1:
            raise ValueError(f"run {self.name!r}: fraction_trained must lie in [0, 1]")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelRun:
        """Build from a JSON-like mapping with the field names above."""
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        if "name" not in known or "forget" not in known or "retain" not in known:
            raise ValueError("a run needs 'name', 'forget' and 'retain'")
        return cls(**known)


def _only(runs: Sequence[ModelRun], role: str) -> ModelRun | None:
    found = [r for r in runs if r.role == role]
    if len(found) > 1:
        raise ValueError(f"more than one {role} model: {[r.name for r in found]}")
    return found[0] if found else None


def build_report(runs: Sequence[ModelRun | Mapping[str, Any]], scale: str = "original") -> dict[str, Any]:
    """JSON-able WaterDrum report: scaled strengths per run, D1 AUROC per run, D2 fit over the series.

    ``scale``: ``"original"`` (divide each owner group by the original model's strength), ``"minmax"``
    (original = 1, retrained = 0) or ``"none"``. D2 uses the scaled forget strengths of the runs that
    have ``fraction_trained``.
    """
    if scale not in SCALINGS:
        raise ValueError(f"scale must be one of {SCALINGS}")
    items = [r if isinstance(r, ModelRun) else ModelRun.from_dict(r) for r in runs]
    if not items:
        raise ValueError("no runs")
    if len({r.name for r in items}) != len(items):
        raise ValueError("run names must be unique")
    original, retrained = _only(items, "original"), _only(items, "retrained")
    forget = np.array([r.forget for r in items])
    retain = np.array([r.retain for r in items])
    if scale == "original":
        if original is None:
            raise ValueError("scale='original' needs a run with role 'original'")
        forget_s, retain_s = scale_by_original(forget, original.forget), scale_by_original(retain, original.retain)
    elif scale == "minmax":
        if original is None or retrained is None:
            raise ValueError("scale='minmax' needs runs with roles 'original' and 'retrained'")
        forget_s = minmax_scale(forget, original.forget, retrained.forget)
        retain_s = minmax_scale(retain, original.retain, retrained.retain)
    else:
        forget_s, retain_s = forget, retain

    rows = []
    for run, f_s, r_s in zip(items, forget_s, retain_s):
        d1 = None
        if run.forget_scores and run.retain_scores:
            d1 = auroc(run.forget_scores, run.retain_scores)
        rows.append(
            {
                "name": run.name,
                "role": run.role,
                "fraction_trained": run.fraction_trained,
                "forget": run.forget,
                "retain": run.retain,
                "forget_scaled": float(f_s),
                "retain_scaled": float(r_s),
                "auroc": d1,
            }
        )
    series = [(row["fraction_trained"], row["forget_scaled"]) for row in rows if row["fraction_trained"] is not None]
    calibration = None
    if len(series) >= 2:
        fit = calibration_fit([s[0] for s in series], [s[1] for s in series])
        calibration = asdict(fit)
    separability = next((row["auroc"] for row in rows if row["role"] == "retrained"), None)
    return to_jsonable(
        {
            "metric": "waterdrum",
            "scale": scale,
            "runs": rows,
            "separability_auroc": separability,
            "calibration": calibration,
        }
    )


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types: numpy scalars/arrays to Python, NaN/inf to None."""
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [to_jsonable(v) for v in (obj.tolist() if isinstance(obj, np.ndarray) else obj)]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        value = float(obj)
        return value if math.isfinite(value) else None
    return obj


def evaluation_plot(report: Mapping[str, Any], path: str | Path, title: str | None = None) -> Path:
    """The paper's plot as PNG: retain strength (x) vs forget strength (y), original and retrained marked."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    runs = report["runs"]
    if not runs:
        raise ValueError("report has no runs")
    key = "" if report.get("scale") == "none" else "_scaled"
    fig = Figure(figsize=(5.5, 4.5), dpi=120)
    FigureCanvasAgg(fig)  # Agg canvas: no GUI backend, no global pyplot state
    ax = fig.add_subplot()
    styles = {"original": ("*", 180, "tab:blue"), "retrained": ("X", 120, "tab:green"), None: ("o", 50, "tab:orange")}
    for run in runs:
        x, y = run[f"retain{key}"], run[f"forget{key}"]
        if x is None or y is None:
            continue
        marker, size, color = styles[run["role"]]
        label = run["role"] or None
        ax.scatter([x], [y], marker=marker, s=size, color=color, label=label, zorder=3, edgecolors="black", linewidths=0.5)
        ax.annotate(run["name"], (x, y), textcoords="offset points", xytext=(5, 4), fontsize=7)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    if unique:
        ax.legend(unique.values(), unique.keys(), fontsize=8, loc="best")
    suffix = {"original": " (÷ original)", "minmax": " (min-max)", "none": ""}.get(report.get("scale", "none"), "")
    ax.set_xlabel(f"retain watermark strength{suffix}")
    ax.set_ylabel(f"forget watermark strength{suffix}")
    ax.grid(True, alpha=0.3)
    ax.set_title(title or "WaterDrum: forget vs retain strength", fontsize=10)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out


def write_report(report: Mapping[str, Any], out_dir: str | Path, stem: str = "waterdrum_report") -> dict[str, Path]:
    """Write ``<stem>.json`` and ``<stem>.png`` into ``out_dir``; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / f"{stem}.json"
    json_path.write_text(json.dumps(to_jsonable(report), indent=2, allow_nan=False) + "\n")
    png_path = evaluation_plot(report, out / f"{stem}.png")
    return {"json": json_path, "png": png_path}
