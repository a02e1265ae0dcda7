"""Candidate minimal deep-unlearning sets: randomised expansion, then pruning, over many seeds.

A set ``M`` of knowledge-base facts is a *deep-unlearning set* for target ``t`` when ``t`` is not in the
closure of ``KB \\ M``; it is *minimal* when no proper subset is one. By monotonicity of the closure, ``M`` is
minimal iff putting back any single member makes ``t`` derivable again (:func:`is_minimal_deep_unlearning_set`).

One seed (:func:`find_minimal_set`), following the Eval-DU paper's approximation algorithm:

1. *Expansion.* ``Q = [t]``, ``M = []``. While ``Q`` is not empty: pop a uniformly random element ``e`` of
   ``Q`` into ``M``; for every rule instance deriving ``e`` (over the whole closure, sorted by body ids) whose
   body has no fact in ``M`` or ``Q``, append one uniformly random body fact to ``Q``. Every derivation of
   every member of ``M`` is then cut, so ``t`` is not derivable from ``KB \\ M``.
2. Keep the knowledge-base facts of ``M``.
3. *Pruning.* Visit ``M`` in a random order and drop each fact whose return still leaves ``t`` underivable.
   One pass suffices: a fact whose return made ``t`` derivable still does after later drops (the kept set
   only grows), so a second pass would never drop anything; the result is minimal.

Determinism (the tie-breaks): each seed drives its own ``numpy.random.default_rng(seed)``; ``Q`` is a list in
insertion order and the random pop takes an index into it; rule instances are visited in ascending order of
their sorted body ids; the random body fact is chosen from the body's ids in ascending order; the pruning
order is a permutation of ``M`` sorted ascending. No step depends on Python's set or hash order. The
de-duplicated sets of all seeds are returned sorted by (size, sorted ids).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .closure import DeductiveClosure, IncrementalClosure


def _check_target(closure: DeductiveClosure, target: int) -> int:
    if not isinstance(target, (int, np.integer)) or isinstance(target, bool):
        raise ValueError(f"target must be an integer fact id, got {target!r}")
    if not 0 <= int(target) < closure.n_kb:
        raise ValueError(
            f"target {target} is not a knowledge-base fact id; expected 0..{closure.n_kb - 1} "
            "(the relationship fact id, e.g. 272, not an index into the list of evaluation targets)"
        )
    return int(target)


def expand_cut_set(closure: DeductiveClosure, target: int, rng: np.random.Generator) -> list[int]:
    """Step 1: the randomised expansion; returns every fact (KB or derived) put in ``M``, in order."""
    verified: list[int] = []
    pending: list[int] = [target]
    seen: set[int] = {target}
    while pending:
        fact = pending.pop(int(rng.integers(len(pending))))
        verified.append(fact)
        for body in closure.bodies_deriving(fact):
            if not any(member in seen for member in body):
                choice = body[int(rng.integers(len(body)))]
                pending.append(choice)
                seen.add(choice)
    return verified


def prune_to_minimal(
    closure: DeductiveClosure, target: int, candidate: Iterable[int], rng: np.random.Generator | None = None
) -> frozenset[int]:
    """Step 3: drop members (random order, or ascending without ``rng``) while ``target`` stays underivable."""
    members = sorted(set(candidate))
    kept = np.ones(closure.n_kb, dtype=bool)
    kept[members] = False
    state = IncrementalClosure(closure, kept, stop_at=target)
    if state.known[target]:
        raise ValueError(f"removing {members} does not stop fact {target} from being derived")
    order = [members[i] for i in rng.permutation(len(members))] if rng is not None else members
    return frozenset(fact for fact in order if not state.try_add(fact, forbidden=target))


def find_minimal_set(closure: DeductiveClosure, target: int, seed: int) -> frozenset[int]:
    """One candidate minimal deep-unlearning set for ``target`` (a knowledge-base fact id) from one seed."""
    target = _check_target(closure, target)
    rng = np.random.default_rng(seed)
    expanded = expand_cut_set(closure, target, rng)
    return prune_to_minimal(closure, target, [f for f in expanded if f < closure.n_kb], rng)


def canonical_order(sets: Iterable[Iterable[int]]) -> list[frozenset[int]]:
    """De-duplicate and sort sets by (size, sorted ids): the order every function here returns."""
    unique = {frozenset(int(i) for i in s) for s in sets}
    return sorted(unique, key=lambda s: (len(s), sorted(s)))


def find_minimal_sets(
    closure: DeductiveClosure, target: int, seeds: int | Iterable[int] = 100
) -> list[frozenset[int]]:
    """De-duplicated candidate minimal sets over ``seeds`` (an int ``n`` means seeds ``0..n-1``)."""
    seed_list = range(seeds) if isinstance(seeds, int) else list(seeds)
    return canonical_order(find_minimal_set(closure, target, seed) for seed in seed_list)


def is_deep_unlearning_set(closure: DeductiveClosure, target: int, candidate: Iterable[int]) -> bool:
    """True iff removing ``candidate`` from the knowledge base makes ``target`` underivable."""
    return not closure.is_derivable(_check_target(closure, target), set(candidate))


def is_minimal_deep_unlearning_set(closure: DeductiveClosure, target: int, candidate: Iterable[int]) -> bool:
    """True iff ``candidate`` is a deep-unlearning set and returning any one member makes ``target`` derivable."""
    members = set(candidate)
    if not is_deep_unlearning_set(closure, target, members):
        return False
    return all(closure.is_derivable(target, members - {m}) for m in members)
