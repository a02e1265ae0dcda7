"""Deductive closure of a fact base under Horn rules, kept as a derivation hypergraph.

A fact is a triple ``(source, relation, target)`` of entity ids meaning "target is source's <relation>".
:func:`deductive_closure` forward-chains the rules (variable rules and ground rules) to a fixpoint and records
*every* rule instance whose body lies in the closure, including instances that re-derive knowledge-base facts.
Because the closure is monotone, the closure of any subset of the knowledge base is computed exactly on that
hypergraph (:meth:`DeductiveClosure.closure_of`, linear-time Horn propagation), which is what Success-DU,
the minimal-set finder and the derivability checks use.

Derivation semantics (as the Eval-DU release): a derived fact must satisfy the gender condition of its
relation (``relation_conditions``); derived self-loops (source == target) are dropped; a derived fact equal to
an existing fact gets no new id (the derivation is recorded against the existing fact).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .family_rules import Rule

Triple = tuple[int, str, int]
GroundRule = tuple[tuple[Triple, ...], Triple]


@dataclass
class DeductiveClosure:
    """All facts derivable from the knowledge base plus the rule instances that derive them.

    Fact ids ``0 .. n_kb-1`` are the knowledge-base facts in their original order; ids ``>= n_kb`` are derived
    facts (each distinct triple once), numbered in breadth-first discovery order.
    """

    facts: list[Triple]
    n_kb: int
    fact_ids: dict[Triple, int]
    instance_heads: list[int]
    instance_bodies: list[tuple[int, ...]]
    derivations: list[list[int]] = field(repr=False)
    occurrences: list[list[int]] = field(repr=False)

    @property
    def n_facts(self) -> int:
        """Number of facts in the closure (knowledge base + derived)."""
        return len(self.facts)

    @property
    def n_derived(self) -> int:
        """Number of derived facts that are not in the knowledge base."""
        return len(self.facts) - self.n_kb

    def bodies_deriving(self, fact_id: int) -> list[tuple[int, ...]]:
        """Body fact-id tuples of every rule instance that derives ``fact_id`` (sorted, distinct)."""
        return sorted({self.instance_bodies[i] for i in self.derivations[fact_id]})

    def closure_of(self, kept_kb: Iterable[int] | np.ndarray, stop_at: int | None = None) -> np.ndarray:
        """Boolean mask over all facts: which are derivable from the kept knowledge-base facts.

        ``kept_kb`` is either a boolean mask of length ``n_kb`` or an iterable of kept fact ids. With
        ``stop_at`` the propagation stops as soon as that fact becomes derivable (the mask is then partial).
        """
        state = IncrementalClosure(self, kept_kb, stop_at=stop_at)
        return np.array(state.known, dtype=bool)

    def is_derivable(self, target: int, removed_kb: Iterable[int]) -> bool:
        """True iff ``target`` is in the closure of the knowledge base minus ``removed_kb``."""
        kept = np.ones(self.n_kb, dtype=bool)
        kept[list(removed_kb)] = False
        return bool(self.closure_of(kept, stop_at=target)[target])


class IncrementalClosure:
    """The closure of a growing set of kept knowledge-base facts, with trial additions that can be undone.

    Used by the minimal-set pruning: putting one fact back costs only the propagation of its consequences.
    """

    def __init__(self, closure: DeductiveClosure, kept_kb: Iterable[int] | np.ndarray, stop_at: int | None = None):
        self.closure = closure
        self.known: list[bool] = [False] * closure.n_facts
        self.remaining: list[int] = [len(body) for body in closure.instance_bodies]
        seeds = _as_ids(kept_kb, closure.n_kb)
        for fact in seeds:
            self.known[fact] = True
        if stop_at is None or not self.known[stop_at]:
            self._propagate(seeds, stop_at, None)

    def _propagate(self, stack: list[int], stop_at: int | None, log: list[tuple[int, int]] | None) -> bool:
        """Forward-chain from ``stack``; True iff ``stop_at`` became known (then stops early).

        With ``log``, every change is recorded as ``(0, instance)`` (a count decrement) or ``(1, fact)``.
        """
        known, remaining = self.known, self.remaining
        heads, occurrences = self.closure.instance_heads, self.closure.occurrences
        stack = list(stack)
        while stack:
            fact = stack.pop()
            for instance in occurrences[fact]:
                remaining[instance] -= 1
                if log is not None:
                    log.append((0, instance))
                if remaining[instance] == 0:
                    head = heads[instance]
                    if not known[head]:
                        known[head] = True
                        if log is not None:
                            log.append((1, head))
                        if head == stop_at:
                            return True
                        stack.append(head)
        return False

    def try_add(self, fact: int, forbidden: int) -> bool:
        """Keep ``fact`` unless that makes ``forbidden`` derivable (then undo and return False)."""
        if self.known[fact]:
            return True
        if fact == forbidden:
            return False
        log: list[tuple[int, int]] = [(1, fact)]
        self.known[fact] = True
        if not self._propagate([fact], forbidden, log):
            return True
        for kind, item in reversed(log):
            if kind == 0:
                self.remaining[item] += 1
            else:
                self.known[item] = False
        return False


def _as_ids(kept: Iterable[int] | np.ndarray, n_kb: int) -> list[int]:
    if isinstance(kept, np.ndarray) and kept.dtype == bool:
        if kept.shape != (n_kb,):
            raise ValueError(f"kept-fact mask has shape {kept.shape}, expected ({n_kb},)")
        return np.flatnonzero(kept).tolist()
    ids = sorted({int(i) for i in kept})
    if ids and (ids[0] < 0 or ids[-1] >= n_kb):
        raise ValueError(f"kept fact ids must lie in 0..{n_kb - 1}")
    return ids


def _condition_holds(
    triple: Triple,
    genders: Sequence[str | None],
    relation_conditions: Mapping[str, tuple[str | None, str | None]],
) -> bool:
    source, relation, target = triple
    if source == target:
        return False
    source_gender, target_gender = relation_conditions.get(relation, (None, None))
    if source_gender is not None and genders[source] != source_gender:
        return False
    return target_gender is None or genders[target] == target_gender


def deductive_closure(
    facts: Sequence[Triple],
    rules: Sequence[Rule] = (),
    genders: Sequence[str | None] = (),
    relation_conditions: Mapping[str, tuple[str | None, str | None]] | None = None,
    ground_rules: Sequence[GroundRule] = (),
) -> DeductiveClosure:
    """Forward-chain ``rules`` and ``ground_rules`` over ``facts`` to a fixpoint, recording all instances.

    Facts are processed one at a time (FIFO); each is joined with the facts processed before it, so every rule
    instance is found when its last body fact is processed. ``genders[e]`` is needed for every entity when a
    relation in ``relation_conditions`` constrains a gender.
    """
    conditions = dict(relation_conditions or {})
    all_facts: list[Triple] = []
    fact_ids: dict[Triple, int] = {}
    for triple in facts:
        triple = (int(triple[0]), str(triple[1]), int(triple[2]))
        if triple in fact_ids:
            raise ValueError(f"duplicate knowledge-base fact {triple} (ids {fact_ids[triple]} and {len(all_facts)})")
        fact_ids[triple] = len(all_facts)
        all_facts.append(triple)
    n_kb = len(all_facts)

    # (relation -> [(rule, position)]) for variable rules; (triple -> [ground rule index]) for ground rules
    rule_slots: dict[str, list[tuple[Rule, int]]] = defaultdict(list)
    for rule in rules:
        for position, (_, relation, _) in enumerate(rule.body):
            rule_slots[relation].append((rule, position))
    ground_waiting: dict[Triple, list[int]] = defaultdict(list)
    ground_remaining: list[int] = []
    for index, (body, _) in enumerate(ground_rules):
        distinct = set(body)
        ground_remaining.append(len(distinct))
        for triple in distinct:
            ground_waiting[triple].append(index)

    by_source: dict[tuple[str, int], list[int]] = defaultdict(list)
    by_target: dict[tuple[str, int], list[int]] = defaultdict(list)
    by_relation: dict[str, list[int]] = defaultdict(list)
    active: set[int] = set()
    instances: dict[tuple[int, tuple[int, ...]], None] = {}  # insertion-ordered set

    queue: deque[int] = deque(range(n_kb))

    def emit(head: Triple, body_ids: Iterable[int]) -> None:
        if not _condition_holds(head, genders, conditions):
            return
        head_id = fact_ids.get(head)
        if head_id is None:
            head_id = len(all_facts)
            fact_ids[head] = head_id
            all_facts.append(head)
            queue.append(head_id)
        instances.setdefault((head_id, tuple(sorted(set(body_ids)))), None)

    def extend(rule: Rule, binding: list[int], todo: list[int], chosen: list[int]) -> None:
        if not todo:
            x, relation, y = rule.head
            emit((binding[x], relation, binding[y]), chosen)
            return
        position, rest = todo[0], todo[1:]
        x, relation, y = rule.body[position]
        bx, by = binding[x], binding[y]
        if bx >= 0 and by >= 0:
            found = fact_ids.get((bx, relation, by))
            candidates = [found] if found is not None and found in active else []
        elif bx >= 0:
            candidates = by_source.get((relation, bx), [])
        elif by >= 0:
            candidates = by_target.get((relation, by), [])
        else:
            candidates = by_relation.get(relation, [])
        for candidate in list(candidates):
            source, _, target = all_facts[candidate]
            if x == y and source != target:
                continue
            new_binding = binding.copy()
            new_binding[x], new_binding[y] = source, target
            extend(rule, new_binding, rest, chosen + [candidate])

    while queue:
        fact_id = queue.popleft()
        source, relation, target = all_facts[fact_id]
        active.add(fact_id)
        by_source[(relation, source)].append(fact_id)
        by_target[(relation, target)].append(fact_id)
        by_relation[relation].append(fact_id)
        for rule, position in rule_slots.get(relation, ()):
            x, _, y = rule.body[position]
            if x == y and source != target:
                continue
            binding = [-1] * rule.num_vars
            binding[x], binding[y] = source, target
            todo = [p for p in range(len(rule.body)) if p != position]
            extend(rule, binding, todo, [fact_id])
        for index in ground_waiting.get(all_facts[fact_id], ()):
            ground_remaining[index] -= 1
            if ground_remaining[index] == 0:
                body, head = ground_rules[index]
                emit(tuple(head), [fact_ids[tuple(t)] for t in body])

    instance_heads = [head for head, _ in instances]
    instance_bodies = [body for _, body in instances]
    derivations: list[list[int]] = [[] for _ in all_facts]
    occurrences: list[list[int]] = [[] for _ in all_facts]
    for index, (head, body) in enumerate(instances):
        derivations[head].append(index)
        for member in body:
            occurrences[member].append(index)
    return DeductiveClosure(all_facts, n_kb, fact_ids, instance_heads, instance_bodies, derivations, occurrences)
