"""The documents of one MUSE evaluation: every set of a corpus in one list (VerbMem prompts, KnowMem questions on
forget and retain, PrivLeak forget and holdout passages), interleaved so that ``--limit N`` keeps every set."""

from __future__ import annotations

import itertools
from typing import Any

import datasets

from unlearn_tasks.dataset_loader import DataError, load_split
from unlearn_tasks.muse.corpora import MuseSet, sets_for
from unlearn_tasks.muse.options import MuseOptions
from unlearn_tasks.muse.prompts import knowmem_prompt


def _rows(options: MuseOptions, config: str, splits: tuple[str, ...], columns: tuple[str, ...]) -> list[dict]:
    return load_split(options.repo_id, config, splits, columns, options.local_dir, prefer_parquet=True)


def _doc(s: MuseSet, index: int, row: dict, icl: list[tuple[str, str]]) -> dict[str, Any]:
    doc = {"id": f"{s.name}/{index}", "set": s.name, "index": index, "prompt": "", "reference": "", "question": "",
           "icl_questions": [q for q, _ in icl], "icl_answers": [a for _, a in icl], "text": ""}
    if s.part == "verbmem":
        doc.update(prompt=str(row["prompt"]), reference=str(row["gt"]))
    elif s.part == "knowmem":
        doc.update(prompt=knowmem_prompt(str(row["question"]), icl), reference=str(row["answer"]),
                   question=str(row["question"]))
    else:
        doc.update(text=str(row["text"]))
    return doc


def build_docs(options: MuseOptions, sets: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """All documents of the options' corpus and parts (only the named ``sets``, if given), interleaved across sets."""
    per_set = []
    for s in sets_for(options.parts):
        if sets is not None and s.name not in sets:
            continue
        rows = _rows(options, s.config, s.splits, s.columns)
        if options.max_items_per_split:
            rows = rows[: options.max_items_per_split]
        if not rows:
            raise DataError(f"{options.repo_id} {s.config}/{s.splits[0]} holds no records.")
        icl = []
        if s.icl_splits:
            icl = [(str(r["question"]), str(r["answer"])) for r in _rows(options, s.config, s.icl_splits, ("question", "answer"))]
        per_set.append([_doc(s, i, r, icl) for i, r in enumerate(rows)])
    return [d for group in itertools.zip_longest(*per_set) for d in group if d is not None]


def load_docs(**metadata: Any) -> datasets.DatasetDict:
    """lm-eval ``custom_dataset`` entry point: metadata (YAML, ``--metadata``, model args) arrives as keywords."""
    docs = build_docs(MuseOptions.from_metadata(metadata))
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})
