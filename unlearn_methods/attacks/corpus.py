"""A user-given relearning corpus (``unlearn attack relearn --relearn-data PATH``): text related to the forget set,
e.g. public passages about the forgotten authors, shown to the unlearned model instead of forget-set items.

Read from a JSON lines (or JSON array) ``.jsonl``/``.json`` file, a ``.csv`` file, a ``.parquet`` file, or a folder
written by Hugging Face ``datasets`` (``save_to_disk``). Rows need a ``text`` column (raw passages: every token is
trained, as in :func:`unlearn_tasks.prompts.encode_text`) or ``question`` and ``answer`` columns (formatted like the
forget set: TOFU's prompt, answer tokens trained, :func:`unlearn_tasks.prompts.encode_qa`); when a file has both,
the question-answer pair is used. Errors name the file and the missing column.

A BLUR relearning set is named by its difficulty instead of a path: ``blur:SOURCE:LEVEL`` (``blur:rwku:hi``,
``blur:whp:mid``, ``blur:wmdp:lo``; :func:`unlearn_tasks.blur.data.relearn_file`), read from
``$UNLEARN_DATA_DIR/forgelab/BLUR`` or the Hub; the corpus record keeps the spec beside the file read.
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from unlearn_tasks.dataset_loader import DataError, check_rows, read_json_records

FILE_FORMATS = {".jsonl": "jsonl", ".json": "jsonl", ".csv": "csv", ".parquet": "parquet"}
ACCEPTED = "a .jsonl/.json (JSON lines or an array of objects), .csv or .parquet file, or a Hugging Face datasets " \
    "folder (save_to_disk)"


@dataclass
class RelearnCorpus:
    path: str
    format: str  # jsonl | csv | parquet | datasets
    kind: str  # "text" (raw passages) or "qa" (question / answer, formatted like the forget set)
    sha256: str  # of the file, or of the folder's files in name order
    records: list[dict] = field(default_factory=list, repr=False)

    def describe(self) -> dict:
        """What was used, for the results file (no records)."""
        return {"path": self.path, "format": self.format, "kind": self.kind, "rows": len(self.records),
                "columns": ["text"] if self.kind == "text" else ["question", "answer"], "sha256": self.sha256}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]:
        h.update(f.read_bytes())
    return h.hexdigest()


def _datasets_rows(path: Path) -> list[dict]:
    import datasets

    try:
        ds = datasets.load_from_disk(str(path))
    except FileNotFoundError:
        raise DataError(f"{path} is a folder but not a Hugging Face datasets folder (no dataset_info.json / "
                        f"state.json from save_to_disk); give {ACCEPTED}.") from None
    if isinstance(ds, datasets.DatasetDict):
        if "train" in ds:
            ds = ds["train"]
        elif len(ds) == 1:
            ds = next(iter(ds.values()))
        else:
            raise DataError(f"{path} holds the splits {list(ds)}; save a single split (or one named 'train').")
    return ds.to_list()


def _read_rows(path: Path) -> tuple[list[dict], str]:
    if path.is_dir():
        return _datasets_rows(path), "datasets"
    fmt = FILE_FORMATS.get(path.suffix.lower())
    if fmt == "jsonl":
        return read_json_records(path, hint=" (with a 'text' column, or 'question' and 'answer')", text_array=False), fmt
    if fmt == "csv":
        with path.open(newline="", encoding="utf-8") as f:
            return list(csv.DictReader(f)), fmt
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist(), fmt
    raise DataError(f"{path}: unknown file type {path.suffix!r}; give {ACCEPTED}.")


def read_corpus(path: str | Path) -> RelearnCorpus:
    """Read and check a relearning corpus; a :class:`DataError` names the file and what to fix."""
    spec = str(path) if str(path).startswith("blur:") else None
    if spec is not None:
        from unlearn_tasks.blur.data import relearn_file

        path = relearn_file(spec)
    path = Path(path)
    if not path.exists():
        raise DataError(f"--relearn-data {path}: no such file or folder; give {ACCEPTED}.")
    rows, fmt = _read_rows(path)
    if not rows:
        raise DataError(f"{path} holds no rows.")
    columns = list(dict.fromkeys(k for r in rows for k in r))
    if "question" in columns and "answer" in columns:
        kind, needed = "qa", ("question", "answer")
    elif "text" in columns:
        kind, needed = "text", ("text",)
    else:
        lacking = "the column 'text'" + (
            f" (or 'question' and 'answer': it has {'question' if 'question' in columns else 'answer'} alone)"
            if "question" in columns or "answer" in columns else " (or the columns 'question' and 'answer')")
        raise DataError(f"{path} lacks {lacking}; it has the columns {columns}. Give a 'text' column (passages, every "
                        "token trained) or 'question' and 'answer' columns (formatted like the forget set).")
    check_rows(rows, needed, str(path))
    records = [{k: str(r[k]) for k in needed} for r in rows]
    return RelearnCorpus(f"{spec} ({path})" if spec else str(path), fmt, kind, _sha256(path), records)
