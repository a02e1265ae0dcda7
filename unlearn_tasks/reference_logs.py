"""Reference runs inside our own lm-eval results files: the one reader every benchmark uses.

A metric that compares a model with a retrained (retain) model, such as Forget Quality or PrivLeak, needs numbers
from the reference model's evaluation. Each benchmark task writes what it would need as a reference into lm-eval's
results file, under ``configs.<task>.unlearning_reference``, tagged with a ``format`` naming the benchmark
(``lm-eval-unlearning/<benchmark>-reference/1``) and the ``model`` that produced it. :func:`pick_record` reads one
back from a results file or an output folder, by the same rules for every benchmark:

* files are ordered by the timestamp lm-eval writes into their names, newest first (file times play no part, so
  copying or touching files never changes which one is read);
* records of the evaluated model itself are never used (it would be its own reference), and a folder holding
  records of several other models is refused (pass the file);
* the file read is returned, for the task to record in its results (``reference_file``, provenance).

What a record is (``accept``) and which one fits (``key`` = ``value``: forget split, corpus) come from the benchmark.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness_ext.provenance import cached_file_sha256, path_fingerprint

RESULTS_KEY = "unlearning_reference"

#: Model arguments (lm-eval ``--model_args``) that say which weights were evaluated.
IDENTITY_KEYS = ("pretrained", "peft", "revision", "delta")

log = logging.getLogger(__name__)


class ReferenceLogError(ValueError):
    """A reference log that cannot serve this evaluation; the message says why and what to pass instead."""


def record_format(benchmark: str) -> str:
    """The ``format`` tag of a benchmark's reference record."""
    return f"lm-eval-unlearning/{benchmark}-reference/1"


def is_benchmark(record: dict, benchmark: str) -> bool:
    """Whether ``record`` is a reference record written by ``benchmark``'s task."""
    return str(record.get("format", "")).startswith(f"lm-eval-unlearning/{benchmark}-reference/")


# --------------------------------------------------------------------------- which model made a results file
#: Files whose contents are a model's weights (what the fingerprint hashes).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
#: What the fingerprint compares, for messages (also stored beside it in results files).
FINGERPRINT_KIND = "sha256 of every weight file"


def _fingerprint(path: str) -> str | None:
    """A content fingerprint of a local model folder: the name and full sha256 of each weight file (None for a Hub
    id or a folder without weights). Exact: any changed byte gives another fingerprint. Each file's hash is cached
    by size and modification time (:func:`harness_ext.provenance.cached_file_sha256`), so it is read once."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        return None
    h = hashlib.sha256()
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
    for f in files:
        h.update(f"{f.name}:{cached_file_sha256(f)}\n".encode())
    return h.hexdigest() if files else None


def model_identity(model_args: dict[str, Any] | str | None) -> dict[str, Any]:
    """What identifies the evaluated weights in lm-eval model arguments (a dict, or the ``k=v,...`` string), with a
    content fingerprint of local folders."""
    if isinstance(model_args, str):
        model_args = dict(kv.split("=", 1) for kv in model_args.split(",") if "=" in kv)
    ident = {k: str(model_args[k]) for k in IDENTITY_KEYS if (model_args or {}).get(k)}
    for k in ("pretrained", "peft", "delta"):
        if k in ident and Path(ident[k]).expanduser().exists():
            ident[k] = str(Path(ident[k]).expanduser().resolve())
    prints = [_fingerprint(ident[k]) for k in ("pretrained", "peft", "delta") if k in ident]
    if prints and all(prints):
        ident["fingerprint"] = hashlib.sha256("|".join(prints).encode()).hexdigest()[:32]
        ident["fingerprint_kind"] = FINGERPRINT_KIND
    return ident


def why_same(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """Why two identities name the same model, in words, or None if they do not: the same weights (identical
    content fingerprints of the same kind), or the same model arguments (``pretrained``, ``peft``, ``revision``,
    ``delta``; a model retrained in place counts as the same model)."""
    if not a or not b:
        return None
    if a.get("fingerprint") and a.get("fingerprint") == b.get("fingerprint"):
        return f"identical weights ({a.get('fingerprint_kind') or 'content fingerprint'} compared)"
    if all(a.get(k) == b.get(k) for k in IDENTITY_KEYS):
        return "the same model arguments (" + ", ".join(k for k in IDENTITY_KEYS if k in a) + ")"
    return None


def same_model(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """True if two identities name the same model (see :func:`why_same`)."""
    return why_same(a, b) is not None


def model_name(ident: dict[str, Any]) -> str:
    """``pretrained=..., peft=...`` of an identity, for messages."""
    return ", ".join(f"{k}={ident[k]}" for k in IDENTITY_KEYS if k in ident) or "unknown model"


# --------------------------------------------------------------------------- reading the records
@dataclass(frozen=True)
class FoundRecord:
    """One reference record, the results file it was read from, and the identity of the model that made it."""

    record: dict[str, Any]
    file: str
    model: dict[str, Any]


def _results_files(path: Path) -> list[Path]:
    """``path`` itself, or the ``results_*.json`` under it, newest first by lm-eval's file-name timestamp."""
    if path.is_file():
        return [path]
    return sorted(path.rglob("results_*.json"), key=lambda p: (p.name, str(p)), reverse=True)


def _read(path: Path, accept: Callable[[dict], bool]) -> list[FoundRecord]:
    found = []
    for f in _results_files(path):
        try:
            data = json.loads(f.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            if path.is_file():
                raise ReferenceLogError(f"Reference {path} is not valid JSON ({getattr(e, 'msg', e)}).") from None
            log.warning("reference: skipping %s (not valid JSON)", f)
            continue
        if not isinstance(data, dict):
            continue
        fallback = model_identity((data.get("config") or {}).get("model_args"))
        for cfg in (data.get("configs") or {}).values():
            record = cfg.get(RESULTS_KEY) if isinstance(cfg, dict) else None
            if isinstance(record, dict) and accept(record):
                found.append(FoundRecord(record, str(f), record.get("model") or fallback))
    return found


def find_records(path: str | Path, accept: Callable[[dict], bool], *, label: str,
                 prefer: Callable[[dict], bool] | None = None,
                 evaluated_model: dict[str, Any] | None = None) -> list[FoundRecord]:
    """The reference records under ``path`` (a results file or an lm-eval output folder) that ``accept`` keeps,
    newest first, all from one model that is not ``evaluated_model`` (see the module's rules). If any record
    satisfies ``prefer`` (the evaluation's split, corpus), only those are returned. ``label`` names the benchmark
    in messages."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ReferenceLogError(f"Reference {path} does not exist.")
    found = _read(path, accept)
    if not found:
        return []
    matching = [r for r in found if prefer(r.record)] if prefer else found
    matching = matching or found
    if evaluated_model:
        own = [r for r in matching if same_model(r.model, evaluated_model)]
        matching = [r for r in matching if not same_model(r.model, evaluated_model)]
        if own and not matching:
            raise ReferenceLogError(
                f"Reference {own[0].file} was produced by the model being evaluated ({model_name(evaluated_model)}): "
                f"it would be its own reference ({why_same(own[0].model, evaluated_model)}). Pass the evaluation of the retain (retrained) model."
            )
        for r in own:
            log.warning("reference: ignoring %s, produced by the model being evaluated", r.file)
    models: list[FoundRecord] = []
    for r in matching:  # records of one file come from one run, even where its model is unknown
        if not any(r.file == m.file or same_model(r.model, m.model) for m in models):
            models.append(r)
    if len(models) > 1:
        raise ReferenceLogError(
            f"Reference {path} holds {label} results of {len(models)} different models "
            f"({'; '.join(f'{model_name(m.model)} in {m.file}' for m in models)}). Pass the results file of the "
            f"retain (retrained) model."
        )
    return matching


def pick_record(path: str | Path, accept: Callable[[dict], bool], key: str, value: str, *, label: str,
                evaluated_model: dict[str, Any] | None = None, hint: str = "") -> FoundRecord | None:
    """The newest reference record under ``path`` with ``record[key] == value`` (see :func:`find_records`); None
    if ``path`` holds no record ``accept`` keeps; :class:`ReferenceLogError` ending in ``hint`` if it holds only
    records for other values of ``key``."""
    found = find_records(path, accept, label=label, prefer=lambda r: r.get(key) == value,
                         evaluated_model=evaluated_model)
    if not found:
        return None
    for r in found:
        if r.record.get(key) == value:
            return r
    others = sorted({str(r.record.get(key)) for r in found})
    raise ReferenceLogError(f"Reference {found[0].file} holds {label} results for {others}, not for {value}. {hint}".rstrip())


def read_log(path: Path, names: tuple[str, ...], label: str, formats: str) -> tuple[Path, Any]:
    """A reference log in another tool's format: ``path`` itself, or the first of ``names`` in the folder ``path``;
    with its parsed JSON. ``formats`` names them in the message when there is none."""
    candidates = [path] if path.is_file() else [path / name for name in names]
    file = next((c for c in candidates if c.is_file()), None)
    if file is None:
        raise ReferenceLogError(
            f"Reference {path} is neither our lm-eval output (results_*.json from a {label} task) nor {formats}.")
    try:
        return file, json.loads(file.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReferenceLogError(f"Reference {file} is not valid JSON ({getattr(e, 'msg', e)}).") from None


def reference_used(given: Any, source: str | None) -> dict[str, Any] | None:
    """The provenance entry of a reference read from the path ``given``: the path, what was read, a content hash
    of the path (None when no path-based reference was used)."""
    if not given or source is None or not isinstance(given, str) or not Path(given).expanduser().exists():
        return None
    return {"path": str(given), "source": source, "sha256": path_fingerprint(Path(given).expanduser())}


def open_unlearning_losses(entry: Any) -> dict[str, list[float]] | None:
    """The per-item average losses of open-unlearning's LOSS attack (``mia_loss.forget/holdout.value_by_index``),
    in item order; None if the log has no LOSS attack. What the reference MIA needs from an OU reference."""
    if not isinstance(entry, dict):
        return None
    out = {}
    for split in ("forget", "holdout"):
        items = (entry.get(split) or {}).get("value_by_index") if isinstance(entry.get(split), dict) else None
        if not isinstance(items, dict) or not items:
            return None
        out[split] = [float(items[k]["score"]) for k in sorted(items, key=int)]
    return out
