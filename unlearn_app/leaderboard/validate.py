"""Validation by recomputation: every aggregate of a submission recomputed from its per-item values.

For each task with per-item values, the values (an open-unlearning ``<BENCH>_EVAL.json``, with every stored
aggregate taken out) are read by :func:`unlearn_app.open_unlearning.reader.read_benchmark`, the reader ``unlearn
report`` and ``unlearn ci --from-results`` use: means, truth-ratio aggregates and MIA AUROCs from the items, Model
Utility from its nine parts, Forget Quality and PrivLeak against the submission's reference. A recomputed number
that differs from the submitted one (relative tolerance :data:`~unlearn_app.open_unlearning.reader.TOLERANCE`) is a
mismatch; a submitted number with nothing to recompute it from is *unverified* (shown as such, not refused).
Every other number of a task that carries lm-eval's samples file is recomputed from it with the task's own
aggregation (:func:`recompute_samples`, :mod:`unlearn_app.leaderboard.recompute`): every benchmark, groups included.
The schema, the file hashes and the id's digest are checked too.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unlearn_app.leaderboard.submission import SUBMISSION_FILE, digest, schema_errors, sha256

#: The result fields that name lm-eval samples files (recomputed by :func:`recompute_samples`).
SAMPLE_KEYS = ("samples", "reference_samples")


@dataclass
class Check:
    """What validation found for one submission."""

    id: str
    folder: str
    errors: list[str] = field(default_factory=list)
    recomputed: dict[str, dict[str, float]] = field(default_factory=dict)  # task -> metric -> recomputed value
    unverified: dict[str, list[str]] = field(default_factory=dict)  # task -> metrics with no per-item values
    mismatched: dict[str, list[str]] = field(default_factory=dict)  # task -> metrics the recomputation contradicts
    record: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return not self.errors


def _stripped(logs: dict[str, Any]) -> dict[str, Any]:
    """The EVAL log with only per-item values left (aggregates and MIA ``auc`` taken out)."""
    out = {}
    for key, entry in logs.items():
        if not isinstance(entry, dict):
            out[key] = {}
            continue
        out[key] = {k: v for k, v in entry.items() if k not in ("agg_value", "auc")}
    return out


def recompute(bench: str, task: str, items: dict[str, Any], reference: Path | None) -> dict[str, float]:
    """Every metric of ``items`` recomputed from its per-item values alone (NaN where there are none)."""
    from unlearn_app.open_unlearning.reader import read_benchmark

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / task  # the reader tells the TOFU split / MUSE corpus from the folder name
        folder.mkdir()
        eval_file = folder / f"{bench}_EVAL.json"
        eval_file.write_text(json.dumps(_stripped(items)))
        ref = None
        if reference is not None:
            ref = Path(tmp) / "reference" / task
            ref.mkdir(parents=True)
            (ref / f"{bench}_EVAL.json").write_bytes(reference.read_bytes())
        return read_benchmark(bench, folder, eval_file, None, str(ref) if ref else None).metrics


def _agree(a: float, b: float) -> bool:
    from unlearn_app.open_unlearning.reader import TOLERANCE

    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=1e-12)


def check_folder(folder: str | Path) -> Check:
    """Validate the submission in ``folder`` (see the module docstring)."""
    from unlearn_app.open_unlearning.reader import OuFolderError

    folder = Path(folder)
    check = Check(folder.name, str(folder))
    try:
        record = json.loads((folder / SUBMISSION_FILE).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        check.errors.append(f"{folder.name}: {SUBMISSION_FILE} cannot be read ({type(e).__name__}: {e})")
        return check
    check.record = record
    bad = schema_errors(record)
    if bad:
        check.errors += [f"{folder.name}: schema: {line}" for line in bad]
        return check
    check.id = record["id"]
    if record["id"] != folder.name:
        check.errors.append(f"{folder.name}: its submission.json says id {record['id']}; the folder must be named by it")
    if not record["id"].endswith(digest(record)[:12]):
        check.errors.append(f"{check.id}: the id's digest is not that of the content ({digest(record)[:12]}): "
                            "submission.json was edited after it was built")
    for rel, expected in record["files"].items():
        path = folder / rel
        if not path.is_file():
            check.errors.append(f"{check.id}: {rel} is missing")
        elif sha256(path.read_bytes()) != expected:
            check.errors.append(f"{check.id}: {rel} has sha256 {sha256(path.read_bytes())[:12]}, the submission "
                                f"records {expected[:12]}")
    named = {e.get(k) for e in record["results"].values() for k in ("items", "reference", *SAMPLE_KEYS)} - {None}
    for rel in sorted(named - set(record["files"])):
        check.errors.append(f"{check.id}: {rel} is named by a result but not listed (with its hash) in files")
    if check.errors:
        return check
    for task, entry in sorted(record["results"].items()):
        claimed = entry["aggregates"]
        if not entry.get("items"):
            check.unverified[task] = sorted(claimed)
            continue
        items = json.loads((folder / entry["items"]).read_text())
        reference = folder / entry["reference"] if entry.get("reference") else None
        try:
            values = recompute(entry["benchmark"], task, items, reference)
        except OuFolderError as e:
            check.errors.append(f"{check.id}: {task}: cannot recompute ({e})")
            continue
        for metric, value in sorted(claimed.items()):
            again = values.get(metric, math.nan)
            if math.isnan(again):
                check.unverified.setdefault(task, []).append(metric)
                continue
            check.recomputed.setdefault(task, {})[metric] = again
            if not _agree(float(value), again):
                check.mismatched.setdefault(task, []).append(metric)
                check.errors.append(f"{check.id}: {task}/{metric} = {value:.6g} submitted, but {again:.6g} "
                                    "recomputed from its per-item values"
                                    + (" and the reference" if metric in ("forget_quality", "privleak") else ""))
    recompute_samples(check, folder, record)
    return check


def _finite(value: Any) -> bool:
    """A number a float holds, not infinite (``10**400`` is not one)."""
    try:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))
    except OverflowError:
        return False


def recompute_samples(check: Check, folder: Path, record: dict[str, Any]) -> None:
    """Recompute the still unverified numbers of the tasks that carry lm-eval's samples
    (:mod:`unlearn_app.leaderboard.recompute`); only files listed in ``files`` (hashes already checked) are read."""
    from unlearn_app.leaderboard.recompute import SamplesError, parse_samples, recompute_run

    results = record["results"]

    def read(rel: Any) -> list[dict[str, Any]] | None:
        if not isinstance(rel, str) or rel not in record["files"]:
            return None
        return parse_samples((folder / rel).read_bytes(), rel)

    try:
        samples = {t: rows for t, e in results.items() if (rows := read(e.get("samples"))) is not None}
        reference = {t: rows for t, e in results.items() if (rows := read(e.get("reference_samples"))) is not None}
        if not samples:
            return
        run = {"results": {t: {f"{m},none": e["aggregates"][m] for m in check.unverified.get(t, [])
                               if _finite(e["aggregates"][m])} for t, e in results.items()},
               "configs": {t: {"provenance": e.get("provenance") or {}} for t, e in results.items()}}
        again = recompute_run(run, samples, reference)
    except SamplesError as e:
        check.errors.append(f"{check.id}: {e}")
        return
    for task, metrics in sorted(check.unverified.items()):
        for metric in list(metrics):
            value = again[task].values.get(metric) if task in again else None
            if value is None:
                continue
            metrics.remove(metric)
            check.recomputed.setdefault(task, {})[metric] = value
            claimed = float(results[task]["aggregates"][metric])
            if not _agree(claimed, value):
                check.mismatched.setdefault(task, []).append(metric)
                check.errors.append(f"{check.id}: {task}/{metric} = {claimed:.6g} submitted, but {value:.6g} "
                                    "recomputed from its lm-eval samples")
        if not metrics:
            del check.unverified[task]


def submission_folders(root: str | Path) -> list[Path]:
    """The submission folders of a leaderboard folder (``root/submissions/*/``), or ``root`` if it is one."""
    root = Path(root)
    if (root / SUBMISSION_FILE).is_file():
        return [root]
    base = root / "submissions" if (root / "submissions").is_dir() else root
    return sorted(p for p in base.iterdir() if p.is_dir() and not p.name.endswith(".partial")
                  and (p / SUBMISSION_FILE).exists())
