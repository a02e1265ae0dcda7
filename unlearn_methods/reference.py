"""The reference model's per-example values, computed once before training.

A method whose loss uses the frozen reference only through one number per example (NPO, DPO, AltPO: the reference's
summed answer NLL of a row) declares the parts of a batch it needs in :attr:`UnlearnMethod.reference_nll`. Before
training, :func:`attach` runs the model (not yet trained, in eval mode, no gradient) over the training set once,
in order, a batch at a time, and stores each row's value with the row: :class:`WithReference` adds it to every item
under :data:`unlearn_methods.losses.REF_NLL_KEY` and :class:`ReferenceCollator` carries it into the batch, so the
sampler's shuffling and the processes' shares keep each value with its row. No reference copy is made for those
methods. A training row is the same in every epoch (the data sets build item ``k`` the same way each time), so the
values are those the per-step forward of the reference computed, up to the order of float summation (another
padding width, another batch size).

The values are written to ``OUT/reference_nll.json`` with the sha256 of the training rows they belong to and of the
values themselves; ``--resume`` reads them from there instead of recomputing (refusing them if the rows differ).
Under a launcher the main process computes and writes them and the others receive them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from unlearn_methods.losses import REF_NLL_KEY, answer_logits, sequence_nll

REFERENCE_FILE = "reference_nll.json"
_FORMAT = 1


class ReferenceValuesError(ValueError):
    """The saved reference values do not belong to this run's training rows; the message says what to do."""


class WithReference(Dataset):
    """``dataset`` whose items carry, in each part of ``values``, that row's reference value (a float)."""

    def __init__(self, dataset: Dataset, values: dict[str, torch.Tensor]) -> None:
        self.dataset, self.values = dataset, values

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, k: int) -> dict[str, Any]:
        item = dict(self.dataset[k])
        for part, column in self.values.items():
            item[part] = {**item[part], REF_NLL_KEY: float(column[k])}
        return item

    def __getattr__(self, name: str) -> Any:  # the wrapped set's own (without_answer, forget, ...)
        if name in ("dataset", "values"):
            raise AttributeError(name)
        return getattr(self.dataset, name)


class ReferenceCollator:
    """``collator`` with each part's per-row reference values carried into its batch (a float32 tensor [B])."""

    def __init__(self, collator: Any) -> None:
        self.collator = collator

    def __call__(self, features: list[dict]) -> dict[str, dict[str, torch.Tensor]]:
        parts = [p for p, v in features[0].items() if isinstance(v, dict) and REF_NLL_KEY in v]
        stripped = [{p: ({k: v for k, v in f[p].items() if k != REF_NLL_KEY} if p in parts else f[p]) for p in f}
                    for f in features]
        batch = self.collator(stripped)
        for part in parts:
            batch[part][REF_NLL_KEY] = torch.tensor([f[part][REF_NLL_KEY] for f in features], dtype=torch.float32)
        return batch


@torch.no_grad()
def compute(model: Any, dataset: Dataset, collator: Any, parts: tuple[str, ...], batch_size: int,
            device: torch.device | str | None = None) -> dict[str, torch.Tensor]:
    """Each row's summed answer NLL under ``model`` (eval mode, no gradient; a LoRA model with its adapter switched
    off) for each of ``parts``: one pass over ``dataset`` in order, ``batch_size`` rows at a time. Returns
    ``{part: float32 tensor [len(dataset)]}``."""
    was_training = model.training
    model.eval()
    device = device or next(model.parameters()).device
    values: dict[str, list[torch.Tensor]] = {part: [] for part in parts}
    adapter_off = model.disable_adapter() if hasattr(model, "disable_adapter") else contextlib.nullcontext()
    try:
        with adapter_off:
            for start in range(0, len(dataset), batch_size):
                batch = collator([dataset[k] for k in range(start, min(start + batch_size, len(dataset)))])
                for part in parts:
                    b = {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch[part].items()}
                    nll, _ = sequence_nll(*answer_logits(model, b))
                    values[part].append(nll.float().cpu())
    finally:
        model.train(was_training)
    return {part: torch.cat(chunks) for part, chunks in values.items()}


def scored(model: Any, batch: dict[str, dict[str, Any]], parts: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """A copy of a collated ``batch`` whose ``parts`` carry their rows' summed answer NLL under ``model`` as it is
    now (call it before training): for code that feeds the Trainer's ``compute_loss`` its own batches."""
    values = compute(model, [batch], lambda rows: rows[0], parts, batch_size=1)
    return {part: ({**b, REF_NLL_KEY: values[part]} if part in parts else b) for part, b in batch.items()}


def rows_digest(dataset: Dataset, parts: tuple[str, ...]) -> str:
    """sha256 of the token ids and labels of ``parts`` of every row, in order: which rows the values belong to."""
    digest = hashlib.sha256()
    for k in range(len(dataset)):
        item = dataset[k]
        for part in parts:
            digest.update(json.dumps([part, list(map(int, item[part]["input_ids"])),
                                      list(map(int, item[part]["labels"]))]).encode())
    return digest.hexdigest()


def values_digest(values: dict[str, torch.Tensor]) -> str:
    """sha256 of the values (their float32 bytes, parts in name order)."""
    digest = hashlib.sha256()
    for part in sorted(values):
        digest.update(part.encode() + values[part].to(torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()


def write(path: Path, values: dict[str, torch.Tensor], rows: str) -> str:
    """Write the values (exact float32 numbers) with the rows' digest; returns the values' sha256."""
    sha = values_digest(values)
    record = {"format": _FORMAT, "statistic": "the reference model's summed answer NLL of each training row",
              "rows_sha256": rows, "values_sha256": sha, "values": {p: v.tolist() for p, v in sorted(values.items())}}
    path.write_text(json.dumps(record))
    return sha


def read(path: Path, parts: tuple[str, ...], rows: str, n: int) -> dict[str, torch.Tensor]:
    """The values saved at ``path`` for these training rows (``rows``: their :func:`rows_digest`, ``n`` of them).
    Raises :class:`ReferenceValuesError` when they are for other rows, incomplete, altered or not finite (a NaN
    would be trained on), or the file cannot be read (not a regular file, not JSON, nested too deeply)."""
    from harness_ext.results import read_json_file

    remedy = "remove it to recompute the reference values, or start afresh without --resume"
    if path.is_symlink() or not path.is_file():
        raise ReferenceValuesError(f"{path.name} is not a regular file (a {'link' if path.is_symlink() else 'folder'}"
                                   f"); {remedy}.")
    record = read_json_file(path, ReferenceValuesError, "reference values", "", remedy)
    try:
        values = {p: torch.tensor(record["values"][p], dtype=torch.float32) for p in parts}
        saved_rows, saved_sha = record["rows_sha256"], record["values_sha256"]
    except (ValueError, KeyError, TypeError, IndexError, RuntimeError) as e:
        raise ReferenceValuesError(f"{path.name} cannot be read ({type(e).__name__}: {str(e).splitlines()[0]}); "
                                   f"{remedy}.") from None
    if saved_rows != rows or any(v.dim() != 1 or len(v) != n for v in values.values()):
        raise ReferenceValuesError(f"{path.name} holds the reference values of other training rows (the data or the "
                                   "tokenizer changed since the run started); resume with the same data, or start "
                                   "afresh without --resume.")
    if values_digest(values) != saved_sha:
        raise ReferenceValuesError(f"{path.name} was altered (its values do not match their sha256); {remedy}.")
    for part, column in values.items():
        bad = (~torch.isfinite(column)).nonzero()
        if len(bad):
            k = int(bad[0])
            raise ReferenceValuesError(f"{path.name} holds a non-finite value for row {k} of {part} "
                                       f"({float(column[k])}); {remedy}.")
    return values


def attach(model: Any, dataset: Dataset, collator: Any, parts: tuple[str, ...], batch_size: int,
           out: Path | None = None, resume: bool = False) -> tuple[Dataset, Any, dict[str, str] | None]:
    """``(dataset, collator)`` carrying each row's reference NLL of ``parts``, and the record of where the values
    are (``{"file", "values_sha256", "computed"}``, None without ``out``). The values are computed by the main
    process (or read from ``out/reference_nll.json`` when resuming) and given to every process."""
    from unlearn_methods.processes import main_process, on_main_process

    if not parts:
        return dataset, collator, None
    procs = main_process()
    path = out / REFERENCE_FILE if out is not None else None

    def load_or_compute() -> tuple[dict[str, torch.Tensor], dict[str, Any] | None]:
        rows = rows_digest(dataset, parts) if path is not None else ""
        if path is not None and resume and (path.exists() or path.is_symlink()):
            values = read(path, parts, rows, len(dataset))
            return values, {"file": REFERENCE_FILE, "values_sha256": values_digest(values), "computed": False}
        values = compute(model, dataset, collator, parts, batch_size, device=procs.device)
        if path is None:
            return values, None
        return values, {"file": REFERENCE_FILE, "values_sha256": write(path, values, rows), "computed": True}

    model.to(procs.device)
    values, record = on_main_process(load_or_compute, errors=(ReferenceValuesError,))
    return WithReference(dataset, values), ReferenceCollator(collator), record
