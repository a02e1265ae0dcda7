"""Where a result came from: package version, git commit, data sources with their revisions or file hashes,
metric modes and the reference run. Written into every results file the package writes.

Data loaders call :func:`note_data_source` for each thing they read; a task collects what was read while it was
built (:func:`recording`), so its record names exactly its own data.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

DISTRIBUTION = "lm-eval-unlearning"
_recorders: list[list[dict[str, Any]]] = []


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def folder_sha256(folder: str | Path) -> str:
    """sha256 of a folder's files (relative names and contents, sorted; symbolic links left out, none followed), each
    file's hash remembered by :func:`cached_file_sha256`, so a rerun does not read a model's weights again."""
    folder = Path(folder)
    digest = hashlib.sha256()
    files = sorted(Path(root, name) for root, _, names in os.walk(folder) for name in names)
    for f in files:
        if f.is_file() and not f.is_symlink():
            digest.update(f"{f.relative_to(folder).as_posix()}\0{cached_file_sha256(f)}\n".encode())
    return digest.hexdigest()


def hash_cache_file() -> Path:
    """Where :func:`cached_file_sha256` keeps its hashes (``$XDG_CACHE_HOME/lm-eval-unlearning/file-sha256.json``)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "lm-eval-unlearning" / "file-sha256.json"


def cached_file_sha256(path: str | Path) -> str:
    """The full sha256 of a file, remembered by resolved path, size and modification time (ns), so a large weight
    file is read once; any change of size or mtime reads it again. A cache that cannot be read or written is
    ignored (the hash is then computed each time)."""
    path = Path(path).expanduser().resolve()
    stat = path.stat()
    key, stamp = str(path), [stat.st_size, stat.st_mtime_ns]
    cache_file = hash_cache_file()
    try:
        cache = json.loads(cache_file.read_text())
        cache = cache if isinstance(cache, dict) else {}
    except (OSError, ValueError):
        cache = {}
    entry = cache.get(key)
    if isinstance(entry, list) and len(entry) == 3 and entry[:2] == stamp:
        return str(entry[2])
    digest = file_sha256(path)
    cache[key] = [*stamp, digest]
    try:  # written to a temporary name and renamed, so a reader never sees half a file
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_name(f".{cache_file.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cache))
        os.replace(tmp, cache_file)
    except OSError:
        pass
    return digest


def path_fingerprint(path: str | Path, skip: tuple[str, ...] = (), cached: bool = False) -> str:
    """sha256 of a file, or of a folder's files (relative names and contents, sorted; top-level ``skip`` names
    left out). ``cached``: each file's hash remembered by :func:`cached_file_sha256` (the same value)."""
    path = Path(path).expanduser()
    file_hash = cached_file_sha256 if cached else file_sha256
    if path.is_file():
        return file_hash(path)
    digest = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        rel = f.relative_to(path)
        if rel.parts[0] in skip:
            continue
        digest.update(f"{rel.as_posix()}\0{file_hash(f)}\n".encode())
    return digest.hexdigest()


@functools.cache
def package_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


@functools.cache
def git_commit() -> str | None:
    """The commit of the package's source checkout (with ``+dirty`` for local changes), or None if not in git."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10)
        if sha.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return sha.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def software() -> dict[str, Any]:
    """Package version and git commit (None outside a git checkout)."""
    return {"package": DISTRIBUTION, "version": package_version(), "git_commit": git_commit()}


def note_data_source(kind: str, source: str, config: str | None = None, path: str | Path | None = None,
                     revision: str | None = None) -> None:
    """Record one dataset read: ``kind`` is ``local`` (``path`` is hashed) or ``hub`` (``revision`` if known)."""
    if not _recorders:
        return
    entry: dict[str, Any] = {"kind": kind, "source": source}
    if config:
        entry["config"] = config
    if path is not None:
        entry["path"] = str(path)
        entry["sha256"] = path_fingerprint(path)
    if kind == "hub":
        entry["revision"] = revision
    for rec in _recorders:
        if entry not in rec:
            rec.append(entry)


@contextlib.contextmanager
def recording() -> Iterator[list[dict[str, Any]]]:
    """Collect the :func:`note_data_source` entries made inside the ``with`` block."""
    rec: list[dict[str, Any]] = []
    _recorders.append(rec)
    try:
        yield rec
    finally:
        _recorders.remove(rec)


def data_fingerprint(entries: list[dict[str, Any]]) -> str:
    """One hash over a task's data entries (file hashes and Hub revisions)."""
    keys = sorted(f"{e.get('source')}|{e.get('config')}|{e.get('sha256') or e.get('revision')}" for e in entries)
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()


def task_record(data: list[dict[str, Any]], modes: dict[str, Any], reference: dict[str, Any] | None) -> dict:
    """The ``provenance`` entry of one task in a results file."""
    return {**software(), "data": data, "data_fingerprint": data_fingerprint(data), "metric_modes": modes,
            "reference": reference}
