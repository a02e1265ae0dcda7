"""The reference (retain) run of a submission: a distinct evaluation, recorded by name, content hash and model.

Forget Quality and PrivLeak compare the run with a reference; a reference made of the run's own per-item values
(or those values nudged by a factor such as ``1 + 1e-9``) would give Forget Quality 1.0 and PrivLeak 0. So a
reference whose forget truth ratios, or whose Min-K% per-item scores, all equal the run's to a relative
:data:`COPY_TOLERANCE` is refused (:func:`near_copy`). The submission records the reference's ``source`` as the run's
folder name (never a local path), ``sha256`` as :func:`files_digest` of the reference files it holds, and the
reference model and revision where its results file names them (:func:`model_of`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

#: Relative difference under which a reference's per-item value counts as the run's own.
COPY_TOLERANCE = 1e-6


def files_digest(files: dict[str, str]) -> str:
    """sha256 of the canonical JSON of ``{relative path: sha256}`` of the reference files a submission holds."""
    return hashlib.sha256(json.dumps(dict(sorted(files.items())), separators=(",", ":")).encode()).hexdigest()


def _leaves(entry: Any, path: str = "") -> dict[str, float]:
    """Every number under a ``value_by_index`` of ``entry`` (an EVAL log entry), by its path."""
    out: dict[str, float] = {}
    if isinstance(entry, dict):
        for key, value in entry.items():
            out |= _leaves(value, f"{path}/{key}")
    elif isinstance(entry, (int, float)) and not isinstance(entry, bool) and "/value_by_index/" in path:
        out[path] = float(entry)
    return out


def _same(a: list[float] | dict[str, float] | None, b: list[float] | dict[str, float] | None) -> bool:
    if not a or not b or len(a) != len(b):
        return False
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return False
        a, b = [a[k] for k in sorted(a)], [b[k] for k in sorted(a)]
    return all(math.isclose(x, y, rel_tol=COPY_TOLERANCE, abs_tol=1e-12) for x, y in zip(a, b, strict=True))


def near_copy(bench: str, run: dict[str, Any], reference: dict[str, Any]) -> str | None:
    """What the reference shares with the run (``"the forget truth ratios"``, ``"the mia_min_k per-item scores"``),
    or None when it is a distinct evaluation."""
    from unlearn_app.open_unlearning.reader import OuFolderError, Unusable, forget_truth_ratios

    if bench == "TOFU":
        try:
            if _same(forget_truth_ratios(run), forget_truth_ratios(reference)):
                return "the forget truth ratios"
        except (Unusable, OuFolderError):
            pass
    if _same(_leaves(run.get("mia_min_k")), _leaves(reference.get("mia_min_k"))):
        return "the mia_min_k per-item scores"
    return None


def _numbers(value: Any, path: str = "") -> dict[str, float]:
    """Every number in ``value`` (nested dicts and lists), by its path."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _numbers(item, f"{path}/{key}").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _numbers(item, f"{path}/{i}").items()}
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return {path: float(value)}
    return {}


def samples_near_copy(run: list[dict[str, Any]], reference: list[dict[str, Any]]) -> bool:
    """Whether a reference run's samples (lm-eval's ``--log_samples`` lines) carry the run's own per-document metric
    values to a relative :data:`COPY_TOLERANCE`: every number the two share (document, filter, metric, place in the
    value) the same."""
    def values(rows: list[dict[str, Any]]) -> dict[str, float]:
        out: dict[str, float] = {}
        for row in rows:
            names = row.get("metrics") if isinstance(row.get("metrics"), list) else []
            for name in names:
                if isinstance(name, str):
                    out |= _numbers(row.get(name), f"{row.get('doc_id')}/{row.get('filter')}/{name}")
        return out

    mine, theirs = values(run), values(reference)
    shared = mine.keys() & theirs.keys()
    return _same({k: mine[k] for k in shared}, {k: theirs[k] for k in shared})


def _model_args(value: Any) -> dict[str, str]:
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, str):
        return dict(part.split("=", 1) for part in value.split(",") if "=" in part)
    return {}


def _public(name: str) -> str:
    """A Hub id as it is; a local path by its last part (no local path goes into a shared submission)."""
    if re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", name) and not Path(name).expanduser().exists():
        return name
    return Path(name.rstrip("/\\")).name or name


def model_of(path: str | Path) -> dict[str, str | None]:
    """``{"model", "revision"}`` of the reference run at ``path`` as its lm-eval results file names them (None where
    it does not, as in an open-unlearning folder)."""
    from harness_ext.results import ResultsFileError, latest_results_file, read_results_file

    try:
        config = read_results_file(latest_results_file(path)).get("config") or {}
    except (ResultsFileError, OSError, IndexError):
        return {"model": None, "revision": None}
    if not isinstance(config, dict):
        return {"model": None, "revision": None}
    args = _model_args(config.get("model_args"))
    model = args.get("pretrained") or args.get("model")
    revision = config.get("model_sha") or config.get("model_revision") or args.get("revision")
    return {"model": _public(model) if model else None, "revision": str(revision) if revision else None}
