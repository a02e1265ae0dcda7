"""Read margin ensembles ``[n_models, n_samples]`` for KLoM and U-LiRA from what users have: a ``.npy`` of
margins (one model ``[n]`` or an ensemble ``[m, n]``), an ``.npz`` with ``margins`` or ``logits`` (+ ``labels``),
logits ``.npy`` plus a labels file, or lm-eval output folders of the ``margins_*`` tasks (one per model, whose
results file holds the per-sample margins under ``configs.<task>.unlearning_margins``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from unlearn_tasks.metrics.klom import KlomInputError, margins_from_logits

#: Key under ``configs.<task>`` of an lm-eval results file that holds a margins task's per-sample record.
RESULTS_KEY = "unlearning_margins"
RECORD_FORMAT = "unlearning_margins/1"


def sample_hash(keys: Sequence[str]) -> str:
    """A fingerprint of the scored samples (their texts, in order), to check that runs scored the same data."""
    digest = hashlib.sha256()
    for key in keys:
        digest.update(key.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()[:16]


class Ensemble:
    """Margins ``[n_models, n_samples]``, the splits the inputs carried (lm-eval records) and the sample hash."""

    def __init__(self, margins: np.ndarray, splits: dict[str, list[int]] | None = None, hash_: str | None = None,
                 sources: list[str] | None = None):
        self.margins = margins
        self.splits = splits
        self.hash = hash_
        self.sources = sources or []


def _load_labels(path: str | Path) -> np.ndarray:
    path = Path(path)
    if not path.is_file():
        raise KlomInputError(f"labels file {path} does not exist")
    if path.suffix == ".npz":
        with np.load(path) as data:
            if "labels" not in data:
                raise KlomInputError(f"{path} has no 'labels' array (it has: {', '.join(data.files)})")
            return data["labels"]
    if path.suffix == ".npy":
        return _load_numeric(path, "labels")
    raise KlomInputError(f"labels file {path}: expected .npy or .npz")


def _load_numeric(path: Path, what: str) -> np.ndarray:
    """A numeric array from a ``.npy`` file; anything else (not numpy's format, pickled objects, strings) is a
    one-line :class:`KlomInputError` naming the file."""
    with open(path, "rb") as f:
        if f.read(6) != b"\x93NUMPY":
            raise KlomInputError(f"{path} is not a numeric .npy array of {what} (not numpy's .npy format; save it "
                                 "with numpy.save)")
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        reason = "it holds pickled Python objects" if "pickle" in str(e) or "Object arrays" in str(e) else (
            str(e).splitlines()[0][:200] if str(e) else type(e).__name__)
        raise KlomInputError(f"{path} is not a numeric .npy array of {what} ({reason})") from None
    if not isinstance(array, np.ndarray) or not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise KlomInputError(f"{path} holds {getattr(array, 'dtype', type(array).__name__)} values, not numbers "
                             f"({what} must be numbers)")
    return array


def _logits_to_margins(logits: np.ndarray, labels: np.ndarray, path: Path) -> np.ndarray:
    if logits.ndim not in (2, 3):
        raise KlomInputError(f"{path}: logits must be [n_samples, n_classes] or [n_models, n_samples, n_classes]; "
                             f"got shape {logits.shape}")
    labels = np.asarray(labels).reshape(-1)
    if labels.size != logits.shape[-2]:
        raise KlomInputError(f"{path}: {logits.shape[-2]} samples of logits but {labels.size} labels")
    return np.atleast_2d(margins_from_logits(logits, np.broadcast_to(labels, logits.shape[:-1])))


def _load_array_file(path: Path, labels: np.ndarray | None) -> np.ndarray:
    if path.suffix == ".npz":
        try:
            data = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise KlomInputError(f"{path} is not a .npz archive ({str(e).splitlines()[0][:200] if str(e) else type(e).__name__})") from None
        with data:
            if "margins" in data:
                return _margin_rows(data["margins"], path)
            if "logits" in data:
                file_labels = data["labels"] if "labels" in data else labels
                if file_labels is None:
                    raise KlomInputError(f"{path} holds logits but no 'labels' array; give --labels FILE")
                return _logits_to_margins(data["logits"], file_labels, path)
            raise KlomInputError(f"{path} has neither a 'margins' nor a 'logits' array (it has: {', '.join(data.files)})")
    array = _load_numeric(path, "margins" if labels is None else "logits")
    if labels is not None:
        return _logits_to_margins(array, labels, path)
    return _margin_rows(array, path)


def _margin_rows(array: np.ndarray, path: Path) -> np.ndarray:
    if array.ndim == 1:
        return array[None, :]
    if array.ndim == 2:
        return array
    raise KlomInputError(f"{path}: margins must be [n_samples] (one model) or [n_models, n_samples]; got shape "
                         f"{array.shape} (for logits give --labels)")


def read_record(path: str | Path, task: str | None = None) -> tuple[dict[str, Any], str]:
    """The margins record of an lm-eval output folder or results file, and the task it belongs to."""
    from harness_ext.results import ResultsFileError, latest_results_file

    try:
        file = latest_results_file(path)
    except (FileNotFoundError, ResultsFileError) as e:  # several runs in one folder: say which to pass
        raise KlomInputError(str(e)) from None
    try:
        configs = json.loads(file.read_text()).get("configs") or {}
    except json.JSONDecodeError as e:
        raise KlomInputError(f"{file} is not valid JSON ({e.msg})") from None
    found = {name: cfg[RESULTS_KEY] for name, cfg in configs.items() if isinstance(cfg, dict) and RESULTS_KEY in cfg}
    if not found:
        raise KlomInputError(f"{file} holds no margins (no configs.<task>.{RESULTS_KEY}); run a margins task, e.g. "
                             f"lm_eval --tasks margins_tofu_forget10 --output_path {path}")
    if task is not None:
        if task not in found:
            raise KlomInputError(f"{file} has no margins for task {task!r} (it has: {', '.join(sorted(found))})")
        return found[task], task
    if len(found) > 1:
        raise KlomInputError(f"{file} holds margins of several tasks ({', '.join(sorted(found))}); pick one with --task")
    name = next(iter(found))
    return found[name], name


def load_one(path: str | Path, labels: np.ndarray | None = None, task: str | None = None) -> Ensemble:
    """Margins rows from one input (file or lm-eval output folder)."""
    path = Path(path)
    if not path.exists():
        raise KlomInputError(f"{path} does not exist")
    if path.is_dir() or (path.suffix == ".json" and path.name.startswith("results")):
        record, _ = read_record(path, task)
        margins = np.asarray([np.nan if v is None else v for v in record["margins"]], dtype=np.float64)
        return Ensemble(margins[None, :], record.get("splits"), record.get("sample_hash"), [str(path)])
    if path.suffix not in (".npy", ".npz"):
        raise KlomInputError(f"{path}: expected a .npy / .npz file or an lm-eval output folder")
    return Ensemble(_load_array_file(path, labels), sources=[str(path)])


def load_ensemble(paths: Sequence[str | Path], labels: str | Path | None = None, task: str | None = None,
                  name: str = "ensemble", progress: bool = False) -> Ensemble:
    """All inputs stacked into one ensemble; the inputs must score the same samples (count, and the sample hash
    when lm-eval records carry one) and carry the same splits."""
    if not paths:
        raise KlomInputError(f"no {name} inputs given")
    label_array = _load_labels(labels) if labels is not None else None
    items = paths
    if progress:
        from tqdm import tqdm

        items = tqdm(paths, desc=f"Reading {name} margins", unit="file")
    parts = [load_one(p, label_array, task) for p in items]
    for part in parts:
        nan = np.isnan(part.margins)
        if nan.any():
            row, col = (int(v) for v in np.argwhere(nan)[0])
            where = f"sample {col}" + (f" of model {row}" if part.margins.shape[0] > 1 else "")
            raise KlomInputError(f"{name} input {part.sources[0]} has {int(nan.sum())} NaN margins (first: {where}); "
                                 "re-run that model or leave the file out")
    first = parts[0]
    for part in parts[1:]:
        if part.margins.shape[1] != first.margins.shape[1]:
            raise KlomInputError(f"{part.sources[0]} has {part.margins.shape[1]} samples but {first.sources[0]} has "
                                 f"{first.margins.shape[1]}; every model must score the same samples")
        if part.hash and first.hash and part.hash != first.hash:
            raise KlomInputError(f"{part.sources[0]} scored other samples than {first.sources[0]} (sample hash "
                                 f"{part.hash} vs {first.hash}): run the same task with the same data and options")
        if part.splits != first.splits:
            raise KlomInputError(f"{part.sources[0]} and {first.sources[0]} carry different splits")
    margins = np.concatenate([p.margins for p in parts], axis=0)
    return Ensemble(margins, first.splits, first.hash, [s for p in parts for s in p.sources])


def load_splits(path: str | Path) -> dict[str, list[int]]:
    """``{split: [sample indices]}`` from a JSON file."""
    path = Path(path)
    if not path.is_file():
        raise KlomInputError(f"splits file {path} does not exist")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise KlomInputError(f"splits file {path} is not valid JSON ({e.msg})") from None
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise KlomInputError(f"splits file {path} must be a JSON object mapping split names to lists of sample "
                             'indices, e.g. {"forget": [0, 1], "retain": [2, 3]}')
    return data
