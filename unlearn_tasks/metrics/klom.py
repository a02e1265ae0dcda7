"""KLoM, the KL divergence of margins (Data-Unlearn-Bench / EasyDUB, Rinberg et al.), and the margins it reads.

A *margin* is ``z_y - logsumexp_{v != y} z_v`` (correct-class logit minus the log-sum-exp of the others), which
equals ``log p_y - log(1 - p_y)``. For each sample, KLoM compares the margins of N unlearned models with those
of M oracle models (retrained without the forget set) through a 20-bin histogram shared by both ensembles:

* ``binning="easydub"`` (default; EasyDUB ``easydub/eval.py``, same bins as data-unlearning-bench ``main``):
  clip both ensembles to [-100, 100]; ``lo``/``hi`` = min/max over both (``hi = lo + 1`` when ``lo >= hi``);
  21 edges ``np.linspace(lo, hi, 21)``; bin index ``np.digitize(x, edges)`` (right=False) and bins 1..20 are
  counted, so a value equal to ``hi`` falls in index 21 and is **dropped**; ``p``, ``q`` = counts / their sum
  (zeros when no value was counted); ``q_safe = where(p > 0, max(q, 1e-5), q)``;
  ``KLoM = sum_{p_k > 0} p_k ln(p_k / q_safe_k)``. No renormalisation of ``q_safe``.
* ``binning="dub-main"``: the same, then ``q_safe`` renormalised to sum 1, as ``scipy.stats.entropy`` does in
  data-unlearning-bench ``main``.
* ``binning="a2d"``: the original Attribute-to-Delete code (``compute_binned_KL_div``): only the first
  ensemble of the KL is clipped; 20 edges ``np.linspace(lo, hi, 20)``; indices 0..19 counted (index 0 never
  occurs, the value equal to ``hi`` is dropped, so 19 bins are used); ``q = max(q, 1e-5)`` in every bin, then
  both renormalised (scipy). Our reading of that code: ``q`` is normalised by its counted values before the clip.

``direction="unlearned-oracle"`` (default, EasyDUB's documented one) is KL(unlearned || oracle): ``p`` is the
unlearned histogram. ``"oracle-unlearned"`` is KL(oracle || unlearned), what data-unlearning-bench ``run.py``
effectively computes (it swaps the arguments). Natural log throughout.

Margins keep their floating dtype for the binning (float32 ensembles are binned in float32, as the reference
code does with float32 arrays); integers become float64. Probabilities and the KL are float64.
The computation is vectorised over models and samples and runs over chunks of samples, so memory stays
bounded (about ``(n_unlearned + n_oracle) * chunk_size * 40`` bytes beyond the inputs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

CLIP = 100.0
N_BINS = 20
EPS = 1e-5
DIRECTIONS = ("unlearned-oracle", "oracle-unlearned")
BINNINGS = ("easydub", "dub-main", "a2d")


class KlomInputError(ValueError):
    """Inputs KLoM cannot use; the message names the problem."""


# --------------------------------------------------------------------------- margins
def margins_from_logits(logits: Any, labels: Any) -> np.ndarray:
    """Margins ``z_y - logsumexp_{v != y} z_v`` (float64) of logits ``[..., C]`` at integer labels ``[...]``."""
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels)
    if z.ndim < 1 or z.shape[-1] < 2:
        raise KlomInputError(f"logits need a class axis of at least 2 classes (last axis); got shape {z.shape}")
    if y.shape != z.shape[:-1]:
        raise KlomInputError(f"labels have shape {y.shape} but logits {z.shape}: one label per row of logits expected")
    if y.size and not np.issubdtype(y.dtype, np.integer):
        if not np.all(np.mod(y, 1) == 0):
            raise KlomInputError("labels must be integer class indices")
        y = y.astype(np.int64)
    n_classes = z.shape[-1]
    if y.size and (y.min() < 0 or y.max() >= n_classes):
        raise KlomInputError(f"labels must lie in [0, {n_classes - 1}]; found {int(y.min())}..{int(y.max())}")
    if np.isnan(z).any():
        raise KlomInputError(f"logits contain {int(np.isnan(z).sum())} NaN values")
    correct = np.take_along_axis(z, y[..., None], axis=-1)[..., 0]
    others = z.copy()
    np.put_along_axis(others, y[..., None], -np.inf, axis=-1)
    top = others.max(axis=-1)
    with np.errstate(invalid="ignore"):
        shifted = np.where(np.isfinite(top)[..., None], others - top[..., None], others)
    lse = top + np.log(np.exp(shifted).sum(axis=-1))
    return correct - lse


def margins_from_logprobs(logprobs: Any) -> np.ndarray:
    """Margins ``log p - log(1 - p)`` from log-probabilities of the correct token, stable near ``p = 1``.

    Values above 0 (rounding) are taken as 0, which gives ``+inf`` (KLoM clips it to 100).
    """
    lp = np.minimum(np.asarray(logprobs, dtype=np.float64), 0.0)
    with np.errstate(divide="ignore"):
        return lp - np.log(-np.expm1(lp))


def reduce_token_margins(token_margins: Sequence[float], reduction: str = "mean") -> float:
    """One margin per sequence: ``mean`` (default) or ``sum`` of its per-token margins."""
    values = np.asarray(token_margins, dtype=np.float64)
    if values.size == 0:
        return float("nan")
    if reduction == "mean":
        return float(values.mean())
    if reduction == "sum":
        return float(values.sum())
    raise KlomInputError(f"unknown reduction {reduction!r}; use 'mean' or 'sum'")


# --------------------------------------------------------------------------- validation
def _ensemble(values: Any, name: str) -> np.ndarray:
    a = np.asarray(values)
    if a.dtype == object or not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise KlomInputError(f"{name} margins must be numbers, got dtype {a.dtype}")
    if not np.issubdtype(a.dtype, np.floating):
        a = a.astype(np.float64)
    if a.ndim != 2:
        raise KlomInputError(f"{name} margins must be a 2-D array [n_models, n_samples]; got shape {a.shape}")
    if a.shape[0] == 0:
        raise KlomInputError(f"{name} ensemble has no models")
    if a.shape[1] == 0:
        raise KlomInputError(f"{name} ensemble has no samples")
    nan = np.isnan(a)
    if nan.any():
        model, sample = (int(v) for v in np.argwhere(nan)[0])
        raise KlomInputError(f"{name} margins contain {int(nan.sum())} NaN values (first: model {model}, sample "
                             f"{sample}); a model that failed to score a sample must be re-run or dropped")
    return a


def check_ensembles(unlearned: Any, oracle: Any) -> tuple[np.ndarray, np.ndarray]:
    """Both ensembles as 2-D float arrays with the same number of samples, no NaN (else :class:`KlomInputError`)."""
    u = _ensemble(unlearned, "unlearned")
    o = _ensemble(oracle, "oracle")
    if u.shape[1] != o.shape[1]:
        raise KlomInputError(f"the unlearned ensemble has {u.shape[1]} samples per model but the oracle ensemble "
                             f"has {o.shape[1]}; both must score the same samples in the same order")
    if u.dtype != o.dtype:
        dtype = np.result_type(u.dtype, o.dtype)
        u, o = u.astype(dtype), o.astype(dtype)
    return u, o


def check_indices(indices: Any, n_samples: int, name: str = "indices") -> np.ndarray:
    """Sample indices as int64, non-empty and in ``[0, n_samples)`` (else :class:`KlomInputError`); ``true`` /
    ``false`` are not indices."""
    if isinstance(indices, (list, tuple)) and any(isinstance(v, (bool, np.bool_)) for v in indices):
        raise KlomInputError(f"split {name!r}: sample indices must be integers, not true/false")
    idx = np.asarray(indices)
    if idx.dtype == np.bool_:
        raise KlomInputError(f"split {name!r}: sample indices must be integers, not true/false")
    if idx.ndim != 1:
        raise KlomInputError(f"split {name!r}: expected a flat list of sample indices, got shape {idx.shape}")
    if idx.size == 0:
        raise KlomInputError(f"split {name!r} is empty; give it at least one sample index")
    if not np.issubdtype(idx.dtype, np.integer):
        if not np.issubdtype(idx.dtype, np.floating) or not np.all(np.mod(idx, 1) == 0):
            raise KlomInputError(f"split {name!r}: sample indices must be integers")
        idx = idx.astype(np.int64)
    bad = (idx < 0) | (idx >= n_samples)
    if bad.any():
        raise KlomInputError(f"split {name!r}: index {int(idx[bad][0])} is out of range for {n_samples} samples "
                             f"(valid: 0..{n_samples - 1}; {int(bad.sum())} bad indices)")
    return idx.astype(np.int64)


def check_chunk_size(chunk_size: Any) -> int:
    """The number of samples computed at once: an integer >= 1 (it changes memory use, never the result)."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
        raise KlomInputError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    return int(chunk_size)


def _check_options(direction: str, binning: str) -> None:
    if direction not in DIRECTIONS:
        raise KlomInputError(f"unknown direction {direction!r}; choose one of {', '.join(DIRECTIONS)}")
    if binning not in BINNINGS:
        raise KlomInputError(f"unknown binning {binning!r}; choose one of {', '.join(BINNINGS)}")


# --------------------------------------------------------------------------- KLoM
def shared_edges(first: np.ndarray, second: np.ndarray, n_edges: int) -> np.ndarray:
    """Per-sample bin edges ``[n_edges, n_samples]`` over both ensembles (``hi = lo + 1`` for a constant sample)."""
    lo = np.minimum(first.min(axis=0), second.min(axis=0))
    hi = np.maximum(first.max(axis=0), second.max(axis=0))
    hi = np.where(lo >= hi, lo + 1, hi).astype(lo.dtype)
    return np.linspace(lo, hi, n_edges)


def digitize_columns(x: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """``np.digitize(x[:, j], edges[:, j])`` (right=False) for every column j at once: the number of edges <= x.

    An arithmetic guess from the (evenly spaced) edges, then corrected against the actual edges until
    ``edges[i - 1] <= x < edges[i]`` holds everywhere, so the result is exact for any edges and rounding.
    """
    n_edges = edges.shape[0]
    step = (edges[-1] - edges[0]) / (n_edges - 1)
    step = np.where(step > 0, step, 1).astype(x.dtype)
    guess = x - edges[0].astype(x.dtype)
    guess /= step
    np.floor(guess, out=guess)
    np.clip(guess, -1, n_edges - 1, out=guess)
    idx = guess.astype(np.int64)
    idx += 1
    # row i of ``padded`` = edges[i - 1]; below the first edge -inf, above the last NaN (never <= x, so an
    # infinite x stops at n_edges, as np.digitize does)
    pad = np.full((1, edges.shape[1]), np.inf, dtype=edges.dtype)
    padded = np.concatenate([-pad, edges, pad * np.nan]).ravel()
    n_cols = edges.shape[1]
    cols = np.arange(n_cols)
    while True:
        flat = idx * n_cols + cols  # position of padded[idx[m, j], j]
        below = padded.take(flat) > x
        above = padded.take(flat + n_cols) <= x
        if not (below.any() or above.any()):
            return idx
        idx -= below
        idx += above


def _bin_counts(x: np.ndarray, edges: np.ndarray, keep: slice) -> np.ndarray:
    """Counts ``[n_samples, n_bins]`` of ``np.digitize(x[:, j], edges[:, j])`` per sample, bins ``keep``."""
    idx = digitize_columns(x, edges)
    width = edges.shape[0] + 1
    flat = (idx + width * np.arange(x.shape[1])[None, :]).ravel()
    return np.bincount(flat, minlength=width * x.shape[1]).reshape(x.shape[1], width)[:, keep]


def _normalise(counts: np.ndarray) -> np.ndarray:
    total = counts.sum(axis=1, keepdims=True)
    return np.divide(counts, total, out=np.zeros(counts.shape, dtype=np.float64), where=total > 0)


def _kl_rows(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``sum_{p > 0} p ln(p / q)`` per row (q > 0 wherever p > 0)."""
    pos = p > 0
    ratio = np.divide(p, q, out=np.ones_like(p), where=pos)
    return np.where(pos, p * np.log(ratio), 0.0).sum(axis=1)


def _klom_chunk(first: np.ndarray, second: np.ndarray, binning: str) -> np.ndarray:
    if binning == "a2d":
        first = np.clip(first, -CLIP, CLIP)
        edges = shared_edges(first, second, N_BINS)
        keep = slice(0, N_BINS)
    else:
        first, second = np.clip(first, -CLIP, CLIP), np.clip(second, -CLIP, CLIP)
        edges = shared_edges(first, second, N_BINS + 1)
        keep = slice(1, N_BINS + 1)
    p = _normalise(_bin_counts(first, edges, keep))
    q = _normalise(_bin_counts(second, edges, keep))
    if binning == "a2d":
        q = np.maximum(q, EPS)
    else:
        q = np.where(p > 0, np.maximum(q, EPS), q)
    if binning != "easydub":  # scipy.stats.entropy renormalises both distributions
        with np.errstate(invalid="ignore", divide="ignore"):
            p = p / p.sum(axis=1, keepdims=True)
            q = q / q.sum(axis=1, keepdims=True)
        out = _kl_rows(np.nan_to_num(p), q)
        out[np.isnan(p).any(axis=1)] = np.nan  # scipy gives NaN when the first ensemble counted nothing
        return out
    return _kl_rows(p, q)


def klom_per_sample(
    unlearned: Any,
    oracle: Any,
    *,
    direction: str = "unlearned-oracle",
    binning: str = "easydub",
    indices: Any = None,
    chunk_size: int = 512,
    progress: bool = False,
) -> np.ndarray:
    """KLoM per sample (float64 ``[n_samples]``, or ``[len(indices)]`` when ``indices`` is given).

    ``unlearned`` ``[n_unlearned, n_samples]`` and ``oracle`` ``[n_oracle, n_samples]`` are margins; the model
    counts may differ. See the module docstring for ``direction`` and ``binning``. NaN only with the renormalising
    binnings (``dub-main``, ``a2d``) for a sample whose first ensemble lies entirely on the dropped top edge.
    """
    _check_options(direction, binning)
    chunk_size = check_chunk_size(chunk_size)
    u, o = check_ensembles(unlearned, oracle)
    cols = np.arange(u.shape[1]) if indices is None else check_indices(indices, u.shape[1])
    first, second = (u, o) if direction == "unlearned-oracle" else (o, u)
    if binning == "a2d" and np.isinf(second[:, cols]).any():
        raise KlomInputError("the a2d binning does not clip the second ensemble of the KL, which holds infinite "
                             "margins; use the easydub binning (it clips to +/-100) or clip them yourself")
    out = np.empty(cols.size, dtype=np.float64)
    starts = range(0, cols.size, chunk_size)
    if progress:
        from tqdm import tqdm

        starts = tqdm(starts, desc="KLoM", unit="chunk")
    for start in starts:
        c = cols[start : start + chunk_size]
        out[start : start + c.size] = _klom_chunk(first[:, c], second[:, c], binning)
    return out


# --------------------------------------------------------------------------- summaries
def summarize(values: np.ndarray) -> dict[str, float | int]:
    """``{"p95", "mean", "n"}`` of per-sample KLoM values (``np.percentile``'s linear interpolation), NaN
    values left out and counted under ``n_undefined`` when there are any."""
    values = np.asarray(values, dtype=np.float64)
    nan = np.isnan(values)
    kept = values[~nan]
    out: dict[str, float | int] = {
        "p95": float(np.percentile(kept, 95)) if kept.size else float("nan"),
        "mean": float(kept.mean()) if kept.size else float("nan"),
        "n": int(values.size),
    }
    if nan.any():
        out["n_undefined"] = int(nan.sum())
    return out


def check_splits(splits: Mapping[str, Any] | None, n_samples: int) -> dict[str, np.ndarray]:
    """Split name -> validated indices; ``None`` is one split ``all`` over every sample."""
    if splits is None:
        return {"all": np.arange(n_samples)}
    if not isinstance(splits, Mapping) or not splits:
        raise KlomInputError("splits must map at least one split name to a list of sample indices, "
                             'e.g. {"forget": [0, 1], "retain": [2, 3]}')
    checked = {str(name): check_indices(idx, n_samples, str(name)) for name, idx in splits.items()}
    for name, idx in checked.items():  # a sample counted twice would weigh twice in the split's mean and P95
        values, counts = np.unique(idx, return_counts=True)
        if (counts > 1).any():
            raise KlomInputError(f"split {name!r}: index {int(values[counts > 1][0])} appears "
                                 f"{int(counts[counts > 1][0])} times ({int((counts > 1).sum())} repeated indices); "
                                 "list each sample once")
    return checked


def klom(
    unlearned: Any,
    oracle: Any,
    splits: Mapping[str, Any] | None = None,
    *,
    direction: str = "unlearned-oracle",
    binning: str = "easydub",
    chunk_size: int = 512,
    progress: bool = False,
) -> tuple[dict[str, Any], np.ndarray]:
    """KLoM summaries per split and the per-sample array.

    Returns ``({"direction", "binning", "splits": {name: {"p95", "mean", "n"}}}, per_sample)``; ``per_sample``
    has one value per sample, NaN for samples in no split (only the samples of some split are computed).
    """
    _check_options(direction, binning)
    u, o = check_ensembles(unlearned, oracle)
    checked = check_splits(splits, u.shape[1])
    needed = np.unique(np.concatenate(list(checked.values())))
    per_sample = np.full(u.shape[1], np.nan)
    per_sample[needed] = klom_per_sample(u, o, direction=direction, binning=binning, indices=needed,
                                         chunk_size=chunk_size, progress=progress)
    summary = {
        "direction": direction,
        "binning": binning,
        "n_unlearned": int(u.shape[0]),
        "n_oracle": int(o.shape[0]),
        "splits": {name: summarize(per_sample[idx]) for name, idx in checked.items()},
    }
    return summary, per_sample
