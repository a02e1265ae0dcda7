"""LUME's data at run time: the Hub (the organisers' gated dataset) or a local folder in one of the release's layouts.

Forget and retain rows (``id``, ``input``, ``output``, ``task``) are read, per set, from the first of:

1. ``<folder>/<set>.jsonl`` (the official evaluation script's folder; the website's ``train/`` / ``validation/``);
2. ``<folder>/<split>/<set>.jsonl`` (the website's conversion of the Hub's parquet, ``lume_split``);
3. ``<folder>/data/<set>.jsonl`` (the GitHub release, amazon-science/lume-llm-unlearning: since its commit b2fa8f9
   these files hold the train and the validation fold together, with no field telling them apart, so ``lume_split``
   cannot select a fold there and a warning says so; its first data commit 859bccb holds the train fold alone, its
   rows with a ``split`` field, as the Hub's rows have);
4. ``<folder>/data/<set>_<split>-*.parquet`` (the Hub repository's files).

An item is a sentence-completion (regurgitation) prompt when its id ends in ``sc<n>``, a question (knowledge) when it
ends in ``qa<n>`` (the official script's rule). The MIA sets are ``member.jsonl`` and ``nonmember.jsonl`` (``id``,
``document``) in ``lume_mia_dir``, else ``<folder>/mia_data/``, else the Hub repository's ``mia_data/``.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unlearn_tasks.dataset_loader import (
    DataError,
    check_rows,
    load_from_hub,
    read_local_rows,
    resolve_local_folder,
)

if TYPE_CHECKING:
    import datasets

log = logging.getLogger(__name__)

SETS = ("forget", "retain")
MIA_SETS = ("member", "nonmember")
FIELDS = ("id", "input", "output", "task")
#: an item's kind from the end of its id: sentence completion (regurgitation) or question (knowledge)
KIND = re.compile(r"(sc|qa)\d+$")
KINDS = {"sc": "regurgitation", "qa": "knowledge"}


def item_kind(item_id: str) -> str | None:
    """``regurgitation`` (id ends in ``sc<n>``), ``knowledge`` (``qa<n>``) or None (the official script skips it)."""
    match = KIND.search(str(item_id))
    return KINDS[match.group(1)] if match else None


def _local_files(folder: Path, name: str, split: str) -> list[Path]:
    for path in (folder / f"{name}.jsonl", folder / split / f"{name}.jsonl", folder / "data" / f"{name}.jsonl"):
        if path.is_file():
            return [path]
    return sorted((folder / "data").glob(f"{name}_{split}-*.parquet"))


def load_rows(name: str, repo_id: str, data_dir: str | None = None, split: str = "train") -> list[dict]:
    """The rows of the ``forget`` or ``retain`` set, checked for ``id``, ``input``, ``output`` and ``task``."""
    folder = resolve_local_folder(repo_id, data_dir)
    if folder is not None:
        files = _local_files(folder, name, split)
        if not files:
            raise DataError(f"No LUME {name} set in {folder}: expected {folder / (name + '.jsonl')}, "
                            f"{folder / 'data' / (name + '.jsonl')} or {folder / 'data'}/{name}_{split}-*.parquet.")
        rows, where = read_local_rows(files, repo_id, f"{name}_{split}"), str(files[0])
        if files[0] == folder / "data" / f"{name}.jsonl" and not any("split" in r for r in rows):
            log.warning("LUME: %s is the GitHub release's %s set, which (since its commit b2fa8f9) holds the train and "
                        "validation folds together: lume_split=%r does not apply, all %d rows are evaluated. For one "
                        "fold use the Hub's data/%s_<fold>-*.parquet or a <fold>/%s.jsonl folder.", where, name, split,
                        len(rows), name, name)
    else:
        rows, where = load_from_hub(repo_id, None, splits=(f"{name}_{split}",)).to_list(), f"{repo_id} {name}_{split}"
    if not rows:
        raise DataError(f"{where} holds no records.")
    check_rows(rows, ("id", "input", "task"), where)
    for n, row in enumerate(rows, 1):
        if not isinstance(row.get("output"), str):
            raise DataError(f"{where}: row {n} has no text 'output' ({row.get('output')!r}); every row needs id, "
                            "input, output and task.")
    return rows


def _mia_folder(options: Any) -> Path | None:
    if options.lume_mia_dir:
        folder = Path(options.lume_mia_dir).expanduser()
        if not folder.is_dir():
            raise DataError(f"lume_mia_dir {folder} does not exist or is not a directory.")
        return folder
    local = resolve_local_folder(options.repo_id, options.local_dir)
    return local / "mia_data" if local is not None else None


def load_mia_rows(name: str, options: Any) -> list[dict]:
    """The ``member`` or ``nonmember`` documents (``id``, ``document``)."""
    folder = _mia_folder(options)
    if folder is not None:
        path = folder / f"{name}.jsonl"
        if not path.is_file():
            raise DataError(f"No LUME MIA set {path}: the MIA task needs member.jsonl and nonmember.jsonl (id, "
                            "document); give their folder as lume_mia_dir.")
        rows = read_local_rows([path], options.repo_id, f"mia_{name}")
    else:
        from huggingface_hub import hf_hub_download

        try:
            path = Path(hf_hub_download(options.repo_id, f"mia_data/{name}.jsonl", repo_type="dataset"))
        except Exception as e:  # the Hub raises many types; one line that says what to do
            raise DataError(f"Could not fetch mia_data/{name}.jsonl of {options.repo_id} ({type(e).__name__}); "
                            "download the MIA files and give their folder as lume_mia_dir.") from None
        rows = read_local_rows([path], options.repo_id, f"mia_{name}")
    if not rows:
        raise DataError(f"LUME MIA set {name} holds no records.")
    check_rows(rows, ("document",), f"LUME MIA {name}.jsonl")
    return rows


def build_docs(options: Any) -> list[dict[str, Any]]:
    """The documents of one LUME task: for a sub-task its forget and retain items (both kinds); for ``mia`` the
    member and nonmember documents. Sets are interleaved, so ``--limit N`` keeps both."""
    per_set: list[list[dict]] = []
    if options.lume_set == "mia":
        for name in MIA_SETS:
            rows = load_mia_rows(name, options)[: options.max_items_per_split]
            per_set.append([{"id": str(r.get("id", i)), "set": name, "subtask": "", "kind": "", "input": "",
                             "output": "", "document": r["document"]} for i, r in enumerate(rows)])
    else:
        subtask = "Task" + options.lume_set[len("task"):]
        for name in SETS:
            rows = [r for r in load_rows(name, options.repo_id, options.local_dir, options.lume_split)
                    if str(r["task"]).strip() == subtask and item_kind(r["id"])]
            if not rows:
                raise DataError(f"LUME {name} set: no {subtask} item whose id ends in sc<n> or qa<n>.")
            rows = rows[: options.max_items_per_split]
            per_set.append([{"id": str(r["id"]), "set": name, "subtask": subtask, "kind": item_kind(r["id"]),
                             "input": r["input"], "output": r["output"], "document": ""} for r in rows])
    shortest = min(map(len, per_set))
    return [d for pair in zip(*per_set) for d in pair] + [d for group in per_set for d in group[shortest:]]


def load_docs(**metadata: Any) -> datasets.DatasetDict:
    """lm-eval ``custom_dataset`` entry point: metadata (YAML, ``--metadata``, model args) arrives as keywords."""
    import datasets

    from unlearn_tasks.lume.options import LumeOptions

    docs = build_docs(LumeOptions.from_metadata(metadata))
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})
