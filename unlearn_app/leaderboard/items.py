"""Aggregates recomputed from per-item values in open-unlearning's EVAL schema (``<BENCH>_EVAL.json``), every
stored aggregate taken out first, by :func:`unlearn_app.open_unlearning.reader.read_benchmark`: the reader
``unlearn report`` and ``unlearn ci --from-results`` use (Forget Quality and PrivLeak against a reference's per-item
values). ``unlearn submit`` computes with it what a run evaluated without a reference lacks; validation recomputes
every number with it."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any


def _stripped(logs: dict[str, Any]) -> dict[str, Any]:
    """The EVAL log with only per-item values left (aggregates and MIA ``auc`` taken out)."""
    out = {}
    for key, entry in logs.items():
        if not isinstance(entry, dict):
            out[key] = {}
            continue
        out[key] = {k: v for k, v in entry.items() if k not in ("agg_value", "auc")}
    return out


def recompute(bench: str, task: str, items: dict[str, Any], reference: dict[str, Any] | None) -> dict[str, float]:
    """Every metric of ``items`` recomputed from its per-item values alone (NaN where there are none)."""
    from unlearn_app.open_unlearning.reader import OuFolderError, read_benchmark

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / task  # the reader tells the TOFU split / MUSE corpus from the folder name
        folder.mkdir()
        eval_file = folder / f"{bench}_EVAL.json"
        eval_file.write_text(json.dumps(_stripped(items)))
        ref = None
        if reference is not None:
            ref = Path(tmp) / "reference" / task
            ref.mkdir(parents=True)
            (ref / f"{bench}_EVAL.json").write_text(json.dumps(reference))
        try:
            return read_benchmark(bench, folder, eval_file, None, str(ref) if ref else None).metrics
        except OuFolderError as e:  # named without the temporary folder
            raise OuFolderError(str(e).replace(f"{tmp}/", "")) from None
