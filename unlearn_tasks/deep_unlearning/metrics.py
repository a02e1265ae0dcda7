"""Deep-unlearning metrics from per-fact correctness: Success-DU, Recall, Accuracy, and sweep trade-offs.

Inputs are the two correctness vectors of one (unlearned) model, in fact order: ``relationships[i]`` is True
when the model still answers relationship fact ``i`` correctly, ``biographies[j]`` likewise. ``U`` is the set
of relationship facts the model now gets wrong. For a candidate minimal set ``M``:

* ``recall(M) = |M & U| / |M|``;  ``acc_rel(M) = 1 - |U - M| / (N_rel - |M|)``.
* **Recall** = recall of the best-matching set ``M*``; **Accuracy (relationships)** = ``acc_rel(M*)``;
  **Accuracy (biographies)** = mean of ``biographies``; **Accuracy (all)** =
  ``(acc_bio * N_bio + acc_rel * (N_rel - |M*|)) / (N_bio + N_rel - |M*|)``.
* **Success-DU** = 1.0 when the target is not in the closure of the facts the model kept (exact check on the
  derivation hypergraph), else 0.0.

Tie-break for ``M*`` (documented, deterministic): highest recall, then highest ``acc_rel``, then the smaller
set, then the lexicographically smallest sorted id list.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from .knowledge_base import KnowledgeBase

DEFAULT_THRESHOLD = 0.8


def as_correctness_vector(values: Any, expected_length: int, name: str) -> np.ndarray:
    """Validate a per-fact correctness vector (booleans or 0/1) and return it as a bool array."""
    if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__len__"):
        raise ValueError(
            f"{name} must be a list of booleans (one per fact, in fact order), got {type(values).__name__}"
        )
    if len(values) != expected_length:
        raise ValueError(
            f"{name} has {len(values)} entries; expected {expected_length} (one boolean per fact of the "
            "knowledge base, in fact order)"
        )
    array = np.asarray(values)
    if array.dtype != bool:
        bad = [v for v in array.ravel().tolist() if v not in (0, 1)]  # True/False compare equal to 1/0
        if bad or array.dtype.kind not in "biuf":
            raise ValueError(f"{name} must hold booleans (or 0/1); found {bad[:3] or array.dtype}")
    return array.astype(bool).reshape(-1)


def answer_is_correct(generated: str, answer: str, aliases: Iterable[str] = ()) -> bool:
    """Per-fact correctness as in the release: the gold answer (or an alias) is a case-insensitive substring."""
    text = generated.lower()
    return any(str(gold).lower() in text for gold in (answer, *aliases) if str(gold))


def set_recall_and_accuracy(forgotten: np.ndarray, minimal_set: Iterable[int]) -> tuple[float, float]:
    """``(recall(M), acc_rel(M))`` for one candidate set, given the boolean mask of forgotten facts."""
    members = np.fromiter(minimal_set, dtype=np.int64)
    hit = int(forgotten[members].sum())
    outside = int(forgotten.sum()) - hit
    size, total = len(members), len(forgotten)
    recall = hit / size
    accuracy = 1.0 - outside / (total - size) if total > size else 1.0
    return recall, accuracy


def best_matching_set(
    forgotten: np.ndarray, candidate_sets: Sequence[frozenset[int]]
) -> tuple[frozenset[int], float, float]:
    """The best-matching minimal set ``M*`` with its recall and ``acc_rel`` (tie-break in the module doc)."""
    if not candidate_sets:
        raise ValueError("no candidate minimal sets for this target")

    def key(item: tuple[frozenset[int], float, float]) -> tuple:
        members, recall, accuracy = item
        return (-recall, -accuracy, len(members), sorted(members))

    scored = [(s, *set_recall_and_accuracy(forgotten, s)) for s in candidate_sets]
    return min(scored, key=key)


def accuracy_all(acc_bio: float | None, n_bio: int, acc_rel: float, n_rel: int, set_size: int) -> float:
    """Accuracy over biographies and the relationship facts outside ``M*``, weighted by their counts."""
    if acc_bio is None or n_bio == 0:
        return acc_rel
    return (acc_bio * n_bio + acc_rel * (n_rel - set_size)) / (n_bio + n_rel - set_size)


def _validated_inputs(
    relationships: Sequence[bool], biographies: Sequence[bool], kb: KnowledgeBase
) -> tuple[np.ndarray, np.ndarray]:
    rel = as_correctness_vector(relationships, kb.n_relationships, "relationships")
    bio = as_correctness_vector(biographies, kb.n_biographies, "biographies")
    return rel, bio


def _score_with_closure(
    rel: np.ndarray, bio: np.ndarray, target: int, kb: KnowledgeBase, derivable_from_kept: np.ndarray
) -> dict[str, Any]:
    forgotten = ~rel
    sets, source = kb.candidate_minimal_sets(target)
    best, recall, acc_rel = best_matching_set(forgotten, sets)
    acc_bio = float(bio.mean()) if len(bio) else None
    return {
        "target": target,
        "target_fact": kb.fact_text(target),
        "success_du": 0.0 if derivable_from_kept[target] else 1.0,
        "recall": recall,
        "acc_relationships": acc_rel,
        "acc_biographies": acc_bio,
        "acc_all": accuracy_all(acc_bio, len(bio), acc_rel, len(rel), len(best)),
        "best_minimal_set": sorted(best),
        "num_candidate_sets": len(sets),
        "covers_candidate_set": recall == 1.0,
        "num_forgotten_relationships": int(forgotten.sum()),
        "target_forgotten": bool(forgotten[target]),
        "minimal_sets_source": source,
    }


def score(relationships: Sequence[bool], biographies: Sequence[bool], target: int, kb: KnowledgeBase) -> dict[str, Any]:
    """Success-DU, Recall and Accuracy (relationships, biographies, all) for one target, as a JSON-able dict.

    ``target`` is a relationship fact id (e.g. 272). Candidate minimal sets are the knowledge base's shipped
    ones when present, else computed (see :meth:`KnowledgeBase.candidate_minimal_sets`).
    """
    target = kb.check_target(target)
    rel, bio = _validated_inputs(relationships, biographies, kb)
    derivable = kb.closure().closure_of(rel, stop_at=target)
    return _score_with_closure(rel, bio, target, kb, derivable)


def score_targets(
    relationships: Sequence[bool],
    biographies: Sequence[bool],
    kb: KnowledgeBase,
    targets: Iterable[int] | None = None,
) -> list[dict[str, Any]]:
    """:func:`score` for many targets (default: all of ``kb.targets``) from one correctness vector.

    The closure of the kept facts is computed once and shared by every target.
    """
    rel, bio = _validated_inputs(relationships, biographies, kb)
    target_list = [kb.check_target(t) for t in (kb.targets if targets is None else targets)]
    derivable = kb.closure().closure_of(rel)
    return [_score_with_closure(rel, bio, t, kb, derivable) for t in target_list]


# ------------------------------------------------------------------------------------ sweep trade-offs


def _padded_points(points: list[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
    """Sweep points (recall, accuracy, success) plus the two trivial models (0, 1, 0) and (1, 0, 1)."""
    return points + [(0.0, 1.0, 0.0), (1.0, 0.0, 1.0)]


def accuracy_recall_auc(points: Iterable[tuple[float, float]]) -> float:
    """Area under ``f(r) = max{accuracy : recall >= r}`` for ``r`` in [0, 1] (the attainable frontier).

    Points should include the padding (0, 1) and (1, 0); ``f`` is a non-increasing step function and the
    area is exact.
    """
    pairs = sorted(points)
    recalls = sorted({0.0, *(min(max(r, 0.0), 1.0) for r, _ in pairs)})
    area, previous = 0.0, 0.0
    for r in recalls:
        if r <= previous:
            continue
        best = max((a for rr, a in pairs if rr >= r), default=0.0)
        area += (r - previous) * best
        previous = r
    return area


def frontier(points: Iterable[tuple[float, float]], grid: np.ndarray) -> np.ndarray:
    """``f(r) = max{accuracy : recall >= r}`` on ``grid`` (points padded as in :func:`sweep_summary`)."""
    pairs = list(points) + [(0.0, 1.0), (1.0, 0.0)]
    return np.array([max((a for rr, a in pairs if rr >= r), default=0.0) for r in grid])


def target_tradeoffs(
    points: list[tuple[float, float, float]], threshold: float = DEFAULT_THRESHOLD
) -> dict[str, float]:
    """Trade-off values for one target from its sweep points ``(recall, accuracy, success_du)``."""
    padded = _padded_points(points)
    return {
        "success_du_at_acc": max(s for _, a, s in padded if a >= threshold),
        "recall_at_acc": max(r for r, a, _ in padded if a >= threshold),
        "acc_at_recall": max(a for r, a, _ in padded if r >= threshold),
        "ar_auc": accuracy_recall_auc((r, a) for r, a, _ in padded),
    }


def sweep_summary(
    scores: Iterable[Mapping[str, Any]],
    threshold: float = DEFAULT_THRESHOLD,
    accuracy_key: str = "acc_all",
) -> dict[str, Any]:
    """Trade-off summaries over a hyperparameter sweep, averaged over targets.

    ``scores`` are :func:`score` dicts, one per (hyperparameter setting, target). For each target the points
    ``(recall, accuracy, success_du)`` are padded with the trivial models ``(0, 1, 0)`` (no unlearning) and
    ``(1, 0, 1)`` (everything unlearned), then: Success-DU@Acc>=t = max Success-DU with accuracy >= t;
    Recall@Acc>=t = max recall with accuracy >= t; Acc@Recall>=t = max accuracy with recall >= t; AR-AUC =
    :func:`accuracy_recall_auc`. Each is averaged over targets (unweighted).
    """
    by_target: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
    count = 0
    for position, item in enumerate(scores):
        missing = [k for k in ("target", "recall", accuracy_key, "success_du") if k not in item]
        if missing:
            raise ValueError(f"score {position} lacks {missing}; pass the dicts returned by score()")
        by_target[int(item["target"])].append(
            (float(item["recall"]), float(item[accuracy_key]), float(item["success_du"]))
        )
        count += 1
    if not by_target:
        raise ValueError("sweep_summary needs at least one score dict")
    per_target = {t: target_tradeoffs(points, threshold) for t, points in sorted(by_target.items())}
    names = ("success_du_at_acc", "recall_at_acc", "acc_at_recall", "ar_auc")
    summary: dict[str, Any] = {name: float(np.mean([v[name] for v in per_target.values()])) for name in names}
    summary.update(
        threshold=threshold,
        accuracy_key=accuracy_key,
        num_targets=len(per_target),
        num_points=count,
        mean_success_du=float(np.mean([s for pts in by_target.values() for _, _, s in pts])),
        per_target={str(t): v for t, v in per_target.items()},
    )
    return summary
