"""Rows of other leaderboards, for the site beside the submissions: the TOFU leaderboard's CSVs, the MUSE
leaderboard's CSV, open-unlearning result folders and our ``unlearn sweep`` leaderboards.

Every row is a :class:`Row`; its ``status`` says what can be checked: ``unverifiable`` (aggregates only: the CSVs,
sweep leaderboards), ``recomputed`` (an open-unlearning folder: its numbers recomputed from its per-item values by
:mod:`unlearn_app.open_unlearning.reader`, but with no provenance).
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ImportError_(ValueError):  # noqa: N801  (not the builtin ImportError)
    """A file that is no leaderboard table we import; the message says which kinds are."""


@dataclass
class Row:
    """One model's numbers on one task, as the site shows them."""

    task: str
    model: str
    family: str
    method: str
    metrics: dict[str, float]
    status: str  # validated | partly verified (N of M) | failed | recomputed | unverifiable
    source: str
    submitter: str = ""
    page: str | None = None  # the submission's page in the site
    recomputed: list[str] = field(default_factory=list)  # metrics recomputed from per-item values, in agreement
    mismatched: list[str] = field(default_factory=list)  # metrics whose recomputation gives another number
    unverified: list[str] = field(default_factory=list)  # metrics of a submission with nothing to recompute them from


#: Column of the TOFU leaderboard CSV (normalised: lower case, spaces to _) -> our metric.
TOFU_COLUMNS = {"model_utility": "model_utility", "forget_quality": "forget_quality",
                "rouge_real_authors": "ra_rougeL_recall", "rouge_world_facts": "wf_rougeL_recall",
                "rouge_retain": "retain_rougeL_recall", "rouge_forget": "forget_rougeL_recall",
                "prob._real_authors": "ra_prob", "prob._world_facts": "wf_prob", "prob._retain": "retain_prob",
                "prob._forget": "forget_prob", "truth_ratio_real_authors": "ra_truth_ratio",
                "truth_ratio_world_facts": "wf_truth_ratio", "truth_ratio_retain": "retain_truth_ratio",
                "truth_ratio_forget": "forget_truth_ratio"}
#: The MUSE leaderboard's four percentages -> our metric (ROUGE ones divided by 100; PrivLeak is a percentage in ours).
MUSE_COLUMNS = {"verbmem": "forget_verbmem", "knowmem_forget": "forget_knowmem", "knowmem_retain": "retain_knowmem",
                "privleak": "privleak"}


def _norm(name: str) -> str:
    return re.sub(r"\s+", "_", name.strip().lower()).replace("-", "_")


def _num(text: Any) -> float | None:
    try:
        value = float(str(text).strip().rstrip("%"))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _split(text: str) -> str | None:
    m = re.search(r"forget[_-]?(01|05|10)", text.lower())
    return f"forget{m.group(1)}" if m else None


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ImportError_(f"{path} holds no rows")
    return [{_norm(k): (v or "").strip() for k, v in r.items() if k} for r in rows]


def tofu_csv(path: Path) -> list[Row]:
    """The TOFU leaderboard's per-model CSV (Method, Submitted By, Epoch, Model Utility, Forget Quality, ...); the
    task is ``tofu_<split>`` from the file name (or a Split / Forget column), the model family the file name."""
    out = []
    for r in _read_csv(path):
        split = _split(r.get("split", "") or r.get("forget", "") or r.get("forget_split", "")) or _split(path.stem)
        metrics = {ours: v for col, ours in TOFU_COLUMNS.items() if (v := _num(r.get(col))) is not None}
        method = r.get("method") or "?"
        if r.get("epoch"):
            method += f" (epoch {r['epoch']})"
        family = r.get("model") or re.sub(r"[_-]?forget[_-]?(01|05|10)", "", path.stem) or path.stem
        out.append(Row(f"tofu_{split}" if split else "tofu", family, family, method, metrics, "unverifiable",
                       f"TOFU leaderboard CSV {path.name}", r.get("submitted_by", "")))
    return out


def muse_csv(path: Path) -> list[Row]:
    """The MUSE leaderboard's CSV: Method (and Corpus / Model) with four percentages: VerbMem Forget, KnowMem
    Forget, KnowMem Retain, PrivLeak."""
    out = []
    for r in _read_csv(path):
        metrics = {}
        for col, value in r.items():
            key = next((k for k in MUSE_COLUMNS if all(part in col for part in k.split("_"))), None)
            if key is None or key == "verbmem" and "retain" in col or (v := _num(value)) is None:
                continue
            metrics[MUSE_COLUMNS[key]] = v if key == "privleak" else v / 100.0
        corpus = (r.get("corpus") or r.get("dataset") or path.stem).lower()
        task = next((f"muse_{c}" for c in ("news", "books") if c in corpus), "muse")
        model = r.get("model") or "?"
        out.append(Row(task, model, model, r.get("method") or "?", metrics, "unverifiable",
                       f"MUSE leaderboard CSV {path.name}", r.get("submitted_by", "")))
    return out


def ou_folder(path: Path) -> list[Row]:
    """An open-unlearning result folder (or a folder of them): its numbers recomputed from its per-item values."""
    from unlearn_app.open_unlearning.reader import ou_folders_under, read_ou_folder

    out = []
    for folder in ou_folders_under(path):
        for t in read_ou_folder(folder):
            out.append(Row(t.task, folder.name, "?", "?", {k: v for k, v in t.metrics.items() if math.isfinite(v)},
                           "recomputed", f"open-unlearning folder {folder}"))
    return out


def sweep_board(path: Path) -> list[Row]:
    """The rows of an ``unlearn sweep`` ``leaderboard.json`` (mean metrics over seeds; no per-item values)."""
    from harness_ext.results import read_json_file

    board = read_json_file(path, ImportError_, "`unlearn sweep` leaderboard.json", "unlearn sweep")
    rows = board.get("leaderboard") if isinstance(board, dict) else None
    shape = ImportError_(f"{path} is no `unlearn sweep` leaderboard.json (a 'leaderboard' list of rows with "
                         "'method', 'values' and per-task 'metrics' objects)")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise shape
    out = []
    for r in rows:
        values, metrics = r.get("values") or {}, r.get("metrics") or {}
        if not isinstance(values, dict) or not isinstance(metrics, dict) or not all(
                isinstance(m, dict) for m in metrics.values()):
            raise shape
        model = str(r.get("model") or "?")
        shown = ", ".join(f"{k}={v}" for k, v in values.items())
        for task, task_metrics in metrics.items():
            out.append(Row(task, model, model, f"{r.get('method')}" + (f" ({shown})" if shown else ""),
                           {k: v for k, v in task_metrics.items()
                            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)},
                           "unverifiable", f"sweep leaderboard {path.name}"))
    return out


def import_table(path: str | Path) -> list[Row]:
    """The rows of ``path``, whichever of the four kinds it is; :class:`ImportError_` (one line) for a file that
    cannot be read as one."""
    from harness_ext.results import ResultsFileError

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"--import {path} does not exist")
    try:
        return _import(path)
    except UnicodeDecodeError:
        raise ImportError_(f"--import {path} is not UTF-8 text; save the table as UTF-8") from None
    except csv.Error as e:
        raise ImportError_(f"--import {path} cannot be read as a CSV table ({e})") from None
    except ResultsFileError as e:  # an open-unlearning folder whose files cannot be read
        raise ImportError_(f"--import {path}: {e}") from None
    except (OSError, RecursionError) as e:
        raise ImportError_(f"--import {path} cannot be read ({type(e).__name__})") from None


def _import(path: Path) -> list[Row]:
    from unlearn_app.open_unlearning.reader import ou_folders_under

    if path.is_dir() or path.name.endswith(("_EVAL.json", "_SUMMARY.json")):
        if not ou_folders_under(path):
            raise ImportError_(f"{path} holds no open-unlearning TOFU_EVAL.json / MUSE_EVAL.json")
        return ou_folder(path)
    if path.suffix == ".json":
        return sweep_board(path)
    if path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as f:
            header = [_norm(h) for h in next(csv.reader(f), [])]
        if "forget_quality" in header or "model_utility" in header:
            return tofu_csv(path)
        if any("verbmem" in h or "knowmem" in h for h in header):
            return muse_csv(path)
        raise ImportError_(f"{path}: a CSV with neither TOFU's columns (Forget Quality, Model Utility) nor MUSE's "
                           "(VerbMem, KnowMem, PrivLeak)")
    raise ImportError_(f"{path}: import a TOFU / MUSE leaderboard .csv, an open-unlearning folder or a sweep "
                       "leaderboard.json")
