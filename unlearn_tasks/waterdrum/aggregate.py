"""Corpus-level WaterDrum metrics from the per-document records of :mod:`unlearn_tasks.waterdrum.scoring`.

All generations of the corpus are verified in one call (shared permutations), under every owner id. A query's
score pools its generations weighted by counted tokens; an owner group's strength is the mean, over its queries,
of the query's score under the query owner's id.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from unlearn_tasks.waterdrum.meta_eval import auroc, owner_strengths, to_jsonable
from unlearn_tasks.waterdrum.options import WaterDrumOptions
from unlearn_tasks.waterdrum.owners import parse_ids
from unlearn_tasks.waterdrum.verify import verify_texts

NAN = float("nan")
FORMAT = "lm-eval-unlearning/waterdrum/1"
BASELINES = {"rouge": "rougeL_recall", "knowmem": "knowmem", "mia": "min_k"}


def metric_names(options: WaterDrumOptions) -> list[str]:
    """Metrics a WaterDrum task reports (forget first)."""
    splits = sorted(options.splits, key=lambda s: (s != "forget", s != "retain", s))
    names = [f"{s}_strength" for s in splits] + ["other_id_strength", "waterdrum_auroc"]
    for part, key in BASELINES.items():
        if part in options.parts:
            names += [f"forget_{key}", f"retain_{key}"]
    return names


def verification_ids(options: WaterDrumOptions, owners: list[int]) -> list[int]:
    """Ids to verify with: ``ids`` from the metadata, else every owner id of the documents (sorted)."""
    ids = parse_ids(options.ids) if options.ids is not None else sorted(set(owners))
    missing = sorted(set(owners) - set(ids))
    if missing:
        raise ValueError(f"WaterDrum: owner ids {missing} are not among the verification ids {ids} (metadata 'ids').")
    return ids


def _mean(values: np.ndarray) -> float:
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else NAN


def _safe_auroc(forget: np.ndarray, retain: np.ndarray) -> float:
    forget, retain = forget[np.isfinite(forget)], retain[np.isfinite(retain)]
    return auroc(forget, retain) if forget.size and retain.size else NAN


def compute(records: list[dict], options: WaterDrumOptions, encoder: Any, vocab_size: int) -> tuple[dict[str, float], dict]:
    """``(metrics, per-item record)`` of one run; the record goes into the results file for ``unlearn waterdrum report``."""
    texts = [r for r in records if r["kind"] == "text" and r["generations"]]
    owners = [int(r["owner"]) for r in texts]
    ids = verification_ids(options, owners) if texts else []
    gens = [g for r in texts for g in r["generations"]]
    query = np.repeat(np.arange(len(texts)), [len(r["generations"]) for r in texts]).astype(np.int64)
    if gens:
        scores, lengths = verify_texts(gens, ids, options.k_p, tokenizer=encoder, vocab_size=vocab_size,
                                       workers=options.workers, return_lengths=True)
        scores = scores[:, :, 0]
    else:
        scores, lengths = np.zeros((0, len(ids))), np.zeros(0, dtype=np.int64)
    weights = lengths.astype(np.float64)
    totals = np.bincount(query, weights=weights, minlength=len(texts))
    pooled = np.zeros((len(texts), len(ids)))
    for k in range(len(ids)):
        pooled[:, k] = np.bincount(query, weights=weights * scores[:, k], minlength=len(texts)) / np.maximum(totals, 1)
    col = np.array([ids.index(o) for o in owners], dtype=np.int64)
    own_query = pooled[np.arange(len(texts)), col] if texts else np.zeros(0)
    own_gen = scores[np.arange(len(gens)), col[query]] if gens else np.zeros(0)
    split_of = np.array([r["split"] for r in texts], dtype=object)

    metrics: dict[str, float] = {}
    for split in options.splits:
        metrics[f"{split}_strength"] = _mean(own_query[split_of == split])
    if len(ids) > 1 and texts:
        others = (pooled.sum(axis=1) - own_query) / (len(ids) - 1)
        metrics["other_id_strength"] = float(others.mean())
    else:
        metrics["other_id_strength"] = NAN
    gen_split = split_of[query] if gens else np.zeros(0, dtype=object)
    metrics["waterdrum_auroc"] = _safe_auroc(own_gen[gen_split == "forget"], own_gen[gen_split == "retain"])

    baselines: dict[str, dict[str, list]] = {}
    for part, key in BASELINES.items():
        if part not in options.parts:
            continue
        rows = [r for r in records if not (isinstance(r[key], float) and math.isnan(r[key]))]
        for split in ("forget", "retain"):
            metrics[f"{split}_{key}"] = _mean(np.array([r[key] for r in rows if r["split"] == split], dtype=np.float64))
        baselines[key] = {"split": [r["split"] for r in rows], "owner": [int(r["owner"]) for r in rows],
                          "value": [float(r[key]) for r in rows]}

    record = {
        "format": FORMAT,
        "benchmark": options.benchmark,
        "dataset_path": options.repo_id,
        "config": options.config,
        "ids": ids,
        "k_p": options.k_p,
        "vocab_size": int(vocab_size),
        "verify_tokenizer": getattr(encoder, "name", str(encoder)),
        "generations_per_query": options.generations,
        "forget_strength": metrics.get("forget_strength", NAN),
        "retain_strength": metrics.get("retain_strength", NAN),
        "forget_owners": sorted({o for o, s in zip(owners, split_of) if s == "forget"}),
        "retain_owners": sorted({o for o, s in zip(owners, split_of) if s == "retain"}),
        "owner_strengths": {str(k): v for k, v in owner_strengths(pooled, owners, ids).items()} if texts else {},
        "queries": {"split": split_of.tolist(), "owner": owners, "index": [int(r["index"]) for r in texts],
                    "score": own_query.tolist(), "tokens": totals.astype(int).tolist(),
                    "scores_all_ids": np.round(pooled, 6).tolist()},
        "generations": {"query": query.tolist(), "score": own_gen.tolist(), "tokens": lengths.astype(int).tolist()},
        "baselines": baselines,
        "metrics": metrics,
    }
    return metrics, to_jsonable(record)
