"""Build the documents of one TOFU evaluation: every evaluation set of a forget size in one list.

lm-eval aggregates within one task, so Forget Quality (forget vs reference), Model Utility (three sets) and the
MIA AUROCs (forget vs holdout) need all sets in one task. The sets are interleaved round-robin so that
``--limit N`` still samples every set.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import datasets

from unlearn_tasks.dataset_loader import check_rows, load_config, source_name
from unlearn_tasks.tofu.splits import HUB_ID, eval_sets


def _doc(set_name: str, index: int, row: dict) -> dict[str, Any]:
    perturbed = row.get("perturbed_answer") or []
    if isinstance(perturbed, str):
        perturbed = [perturbed]
    return {
        "id": f"{set_name}/{index}",
        "split": set_name,
        "index": index,
        "question": row["question"],
        "answer": row["answer"],
        "paraphrased_answer": row.get("paraphrased_answer") or "",
        "perturbed_answers": [str(p) for p in perturbed],
    }


def build_docs(
    forget_split: str,
    repo_id: str = HUB_ID,
    data_dir: str | os.PathLike | None = None,
    sets: list[str] | None = None,
    max_items_per_split: int | None = None,
) -> list[dict[str, Any]]:
    """All documents for ``forget_split``, interleaved across evaluation sets."""
    per_set = []
    for es in eval_sets(forget_split):
        if sets is not None and es.name not in sets:
            continue
        table = load_config(repo_id, es.config, es.columns, data_dir=data_dir)
        rows = table.to_list()[:max_items_per_split] if max_items_per_split else table.to_list()
        lists = [c for c in es.columns if c == "perturbed_answer"]
        check_rows(rows, [c for c in es.columns if c not in lists], source_name(repo_id, es.config, data_dir), lists)
        per_set.append([_doc(es.name, i, r) for i, r in enumerate(rows)])
    return [d for group in itertools.zip_longest(*per_set) for d in group if d is not None]


def load_docs(
    forget_split: str = "forget10",
    dataset_path: str | None = None,
    data_dir: str | None = None,
    sets: list[str] | None = None,
    max_items_per_split: int | None = None,
    **_: Any,
) -> datasets.DatasetDict:
    """lm-eval ``custom_dataset`` entry point: metadata (YAML, ``--metadata``, model args) arrives as keywords."""
    docs = build_docs(forget_split, dataset_path or HUB_ID, data_dir, sets, max_items_per_split)
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})
