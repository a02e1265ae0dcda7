"""Per-document WaterDrum scoring: the requests a document issues and the compact record of its outputs.

Watermark verification is *not* done here: permutations are shared across texts, so the corpus is verified
once, in the aggregation (:mod:`unlearn_tasks.waterdrum.aggregate`). A record keeps the generations for that.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from unlearn_tasks.metrics import mia
from unlearn_tasks.metrics.rouge import rouge_l_recall, rouge_scores
from unlearn_tasks.waterdrum.options import WaterDrumOptions

NAN = float("nan")
SAMPLE, LOGPROBS, KNOWMEM = "sample", "logprobs", "knowmem"


def request_plan(doc: dict, options: WaterDrumOptions) -> list[str]:
    """The requests of a document, in ``idx`` order: K sampled generations, answer log-probs, a greedy answer."""
    if doc["kind"] == "knowmem":
        return [KNOWMEM]
    plan = [SAMPLE]
    if "mia" in options.parts:
        plan.append(LOGPROBS)
    if options.benchmark == "tofu" and "knowmem" in options.parts:
        plan.append(KNOWMEM)
    return plan


def _as_list(value: Any) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def score_document(doc: dict, results: list, options: WaterDrumOptions) -> dict[str, Any]:
    """One record per document: generations (verified later), ROUGE-L recall, KnowMem, Min-K%."""
    plan = request_plan(doc, options)
    if len(results) != len(plan):
        raise RuntimeError(f"WaterDrum: document {doc['id']} expected {len(plan)} responses, got {len(results)}")
    got = dict(zip(plan, (_as_list(r) for r in results)))
    record: dict[str, Any] = {"kind": doc["kind"], "split": doc["split"], "owner": doc["owner"], "index": doc["index"],
                              "generations": [], "rougeL_recall": NAN, "knowmem": NAN, "min_k": NAN}
    if SAMPLE in got:
        gens = [str(g) for g in got[SAMPLE]]
        record["generations"] = gens
        if "rouge" in options.parts and gens:
            record["rougeL_recall"] = float(np.mean([rouge_l_recall(doc["reference"], g) for g in gens]))
    if KNOWMEM in got:
        record["knowmem"] = rouge_scores(doc["reference"], str(got[KNOWMEM][0]))["rougeL_f1"]
    if LOGPROBS in got:
        lps = got[LOGPROBS][0]["logprobs"]
        record["min_k"] = mia.min_k_score(lps, options.mia_k) if len(lps) else NAN
    return record
