"""LUME's scores, as the official evaluation script (SemEval-2025 Task 4) defines them.

* Regurgitation: ROUGE-L recall of the greedy completion against the item's ``output`` (Google's rouge-score, Porter
  stemmer); knowledge: exact match after stripping and lower-casing both texts.
* Per sub-task and set, the mean of each; the **task aggregate** is the harmonic mean of the 12 values (3 sub-tasks x
  {regurgitation, knowledge} x {forget, retain}), each forget value inverted to ``1 - value`` (0 if any value is 0).
* **MIA**: the loss attack's AUC with members as label 1 and minus the document's mean token loss as the score; the
  **MIA score** is ``1 - 2 |AUC - 0.5|`` (1: members and nonmembers indistinguishable).
* The **final score** is the arithmetic mean of the task aggregate, the MIA score and MMLU accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from unlearn_tasks.metrics import mia
from unlearn_tasks.metrics.rouge import rouge_l_recall

NAN = float("nan")
SUBTASK_TASKS = ("lume_task1", "lume_task2", "lume_task3")
#: the four per-sub-task metrics that enter the task aggregate; forget ones inverted
TERMS = ("forget_regurgitation", "forget_knowledge", "retain_regurgitation", "retain_knowledge")
#: the task (lm-eval's group) whose ``acc`` is the MMLU part, and lm-eval's MIA task
MMLU_TASK = "mmlu"
MIA_TASK = "lume_mia"


def regurgitation(reference: str, completion: str) -> float:
    """ROUGE-L recall (stemmed) of ``completion`` against ``reference``."""
    return rouge_l_recall(str(reference), str(completion), use_stemmer=True)


def exact_match(reference: str, answer: str) -> float:
    """1.0 when the texts are equal after ``strip()`` and ``lower()``, else 0.0."""
    return float(str(reference).strip().lower() == str(answer).strip().lower())


def harmonic_mean(values: Sequence[float]) -> float:
    """Harmonic mean as Python's ``statistics.harmonic_mean`` computes it for values in [0, 1]: 0 if any value is 0;
    NaN if there is none or any is NaN."""
    if not values or any(math.isnan(v) for v in values):
        return NAN
    if any(v == 0 for v in values):
        return 0.0
    return len(values) / sum(1.0 / v for v in values)


def mia_auc(member_losses: Sequence[float], nonmember_losses: Sequence[float]) -> float:
    """The loss attack's AUC: members label 1, score = minus the loss (a member's lower loss ranks it higher)."""
    # mia.mia_auroc puts its first argument as label 0 and ranks by the loss itself: the same AUC
    return mia.mia_auroc(list(member_losses), list(nonmember_losses))


def mia_score(auc: float) -> float:
    """``1 - 2 |AUC - 0.5|``."""
    return NAN if math.isnan(auc) else 1.0 - abs(auc - 0.5) * 2.0


def task_aggregate(per_task: Mapping[str, Mapping[str, float]]) -> float:
    """The harmonic mean of the 12 sub-task values (forget ones as ``1 - value``); NaN if any is missing."""
    values = []
    for task in SUBTASK_TASKS:
        for term in TERMS:
            value = per_task.get(task, {}).get(term, NAN)
            values.append(1.0 - value if term.startswith("forget_") else value)
    return harmonic_mean(values)


def lume_scores(per_task: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The group-level scores of ``lume`` from every task's metrics (``{task: {metric: value}}``, MMLU's ``acc``
    under ``mmlu``): ``task_aggregate``, ``mia_score``, ``mmlu_acc`` and ``final_score`` (their mean; NaN where a
    part is missing)."""
    parts = {
        "task_aggregate": task_aggregate(per_task),
        "mia_score": float(per_task.get(MIA_TASK, {}).get("mia_score", NAN)),
        "mmlu_acc": float(per_task.get(MMLU_TASK, {}).get("acc", NAN)),
    }
    values = list(parts.values())
    parts["final_score"] = NAN if any(math.isnan(v) for v in values) else float(np.mean(values))
    return parts
