"""A results cache for ``unlearn ci``: an unchanged checkpoint is not evaluated twice, a changed one never reuses
stale numbers.

The key hashes everything the numbers depend on: the model's revision (a Hub commit, or a content hash of a local
folder, LoRA adapter and base model both), each task's name, version and data fingerprint (hashes of the files
read, or the Hub revision), the task options (metadata, reference run content included), model arguments,
backend and ``limit``. Entries are folders ``<root>/<key>/`` holding the lm-eval results file and the key's
inputs (``key.json``) for inspection.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from harness_ext.provenance import path_fingerprint

log = logging.getLogger(__name__)

CACHE_ENV = "UNLEARN_CACHE_DIR"
#: Files of a checkpoint folder that do not change its numbers (the model card is rewritten by --update-card).
SKIP_IN_MODEL_HASH = ("README.md", "checkpoints", "eval", "work", ".git", ".cache")


def default_root() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "lm-eval-unlearning" / "ci"


def hub_revision(repo_id: str, revision: str | None = None) -> str | None:
    """The commit sha of a Hub model (``revision`` may be a branch or tag), or None when the Hub cannot be asked."""
    try:
        from huggingface_hub import HfApi

        return HfApi().model_info(repo_id, revision=revision).sha
    except Exception as e:  # offline, gated, missing: the caller falls back to no caching
        log.warning("Could not read the Hub revision of %s (%s: %s)", repo_id, type(e).__name__, e)
        return None


def model_revision(model: str, revision: str | None = None) -> str | None:
    """``local:<sha256 of the folder's files>`` or ``hub:<id>@<commit>``; None if it cannot be pinned."""
    path = Path(model).expanduser()
    if path.is_dir():
        return "local:" + path_fingerprint(path, skip=SKIP_IN_MODEL_HASH)
    if revision and len(revision) == 40 and all(c in "0123456789abcdef" for c in revision.lower()):
        return f"hub:{model}@{revision.lower()}"
    sha = hub_revision(model, revision)
    return f"hub:{model}@{sha}" if sha else None


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def cache_key(inputs: dict[str, Any]) -> str:
    """sha256 of the inputs (JSON, sorted keys)."""
    return hashlib.sha256(json.dumps(_jsonable(inputs), sort_keys=True).encode()).hexdigest()


class ResultsCache:
    """Folder-per-key store of lm-eval results files."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root else default_root()

    def get(self, key: str) -> Path | None:
        """The cached lm-eval results file for ``key``, or None."""
        file = self.root / key / "results.json"
        return file if file.is_file() else None

    def put(self, key: str, results_file: str | Path, inputs: dict[str, Any]) -> Path | None:
        """Store a results file under ``key`` (atomically; a concurrent writer of the same key wins harmlessly)."""
        entry = self.root / key
        tmp = self.root / f".{key}.{os.getpid()}.tmp"
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            shutil.copyfile(results_file, tmp / "results.json")
            (tmp / "key.json").write_text(json.dumps(_jsonable(inputs), indent=2, sort_keys=True))
            shutil.rmtree(entry, ignore_errors=True)
            tmp.rename(entry)
        except OSError as e:  # a full disk or a race must not fail the evaluation that just succeeded
            log.warning("Could not store results in the cache %s (%s)", entry, e)
            shutil.rmtree(tmp, ignore_errors=True)
            return None
        return entry / "results.json"
