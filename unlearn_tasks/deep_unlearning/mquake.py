"""Deep-unlearning knowledge base from MQuAKE multi-hop chains (e.g. MQuAKE-CF-3k-v2), read from a local JSON.

Each MQuAKE case has a chain of single-hop facts ``(s1, r1, o1), (o1, r2, o2), ..., (o_{k-1}, rk, ok)``
(``orig.triples``, Wikidata ids) with a question per hop (``single_hops``), and multi-hop ``questions`` whose
answer is ``ok``. Following the paper's use of MQuAKE as *one-step deduction instances*:

* every distinct hop is a fact; the composed fact ``(s1, "r1/r2/.../rk", ok)`` is a fact and an evaluation
  target (one per case, de-duplicated);
* one ground rule per case: ``hop_1 AND ... AND hop_k -> composed`` (``composition="flat"``, the default).
  ``composition="chain"`` instead composes left to right (``hop_1 AND hop_2 -> (s1, r1/r2, o2)``, then that
  AND ``hop_3`` -> ...), the intermediate compositions being derived facts.

With flat composition the candidate minimal deep-unlearning sets are exact: the target plus a minimal hitting
set of the bodies that derive it (for one chain: the target plus any one hop). ``edited=True`` uses the
counterfactual chain (``new_triples``, ``new_single_hops``, ``new_answer``) instead of the original one.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .closure import DeductiveClosure, GroundRule, Triple
from .knowledge_base import KnowledgeBase
from .minimal_sets import canonical_order, find_minimal_sets

COMPOSITIONS = ("flat", "chain")


def load_mquake_cases(path: str | Path) -> list[dict[str, Any]]:
    """Read an MQuAKE dataset file (a JSON list of cases)."""
    path = Path(path)
    try:
        cases = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"MQuAKE file {path} not found; download e.g. datasets/MQuAKE-CF-3k-v2.json") from None
    if not isinstance(cases, list):
        raise ValueError(f"{path}: expected a JSON list of MQuAKE cases, got {type(cases).__name__}")
    return cases


def _field(case: dict[str, Any], position: int, *keys: str) -> Any:
    value: Any = case
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise ValueError(f"MQuAKE case {position} (case_id {case.get('case_id')}) lacks {'.'.join(keys)}")
        value = value[key]
    return value


def _chain(case: dict[str, Any], position: int, edited: bool) -> tuple[list[list[str]], list[dict[str, Any]], list]:
    prefix = "new_" if edited else ""
    triples = _field(case, position, "orig", f"{prefix}triples")
    hops = _field(case, position, f"{prefix}single_hops")
    if len(triples) != len(hops) or not triples:
        raise ValueError(
            f"MQuAKE case {position}: {len(triples)} {prefix}triples but {len(hops)} {prefix}single_hops; "
            "they must pair one to one"
        )
    labels = case.get("orig", {}).get(f"{prefix}triples_labeled") or []
    for a, b in itertools.pairwise(triples):
        if a[2] != b[0]:
            raise ValueError(f"MQuAKE case {position}: hop {a} does not lead into hop {b}")
    return triples, hops, labels if len(labels) == len(triples) else []


def _exact_one_step_sets(closure: DeductiveClosure, target: int) -> list[frozenset[int]] | None:
    """Target plus each minimal hitting set of its bodies, when every body fact is an underivable KB fact."""
    bodies = [set(b) for b in closure.bodies_deriving(target)]
    members = set().union(*bodies) if bodies else set()
    if any(m >= closure.n_kb or closure.derivations[m] for m in members):
        return None
    hitting = {frozenset(choice) for choice in itertools.product(*[sorted(b) for b in bodies])}
    minimal = [h for h in hitting if not any(other < h for other in hitting)]
    return canonical_order(h | {target} for h in minimal) if bodies else [frozenset({target})]


def build_mquake_kb(
    cases: Sequence[dict[str, Any]],
    *,
    edited: bool = False,
    composition: str = "flat",
    max_cases: int | None = None,
    name: str = "mquake",
) -> KnowledgeBase:
    """Build the deep-unlearning knowledge base (facts, ground rules, targets, minimal sets) from cases."""
    if composition not in COMPOSITIONS:
        raise ValueError(f"composition must be one of {COMPOSITIONS}, got {composition!r}")
    entity_ids: dict[str, int] = {}
    entity_names: list[str] = []
    facts: list[Triple] = []
    fact_ids: dict[Triple, int] = {}
    records: list[dict[str, Any]] = []
    ground_rules: list[GroundRule] = []
    targets: list[int] = []

    def entity(qid: str, label: str | None) -> int:
        if qid not in entity_ids:
            entity_ids[qid] = len(entity_names)
            entity_names.append(label or qid)
        elif label and entity_names[entity_ids[qid]] == qid:
            entity_names[entity_ids[qid]] = label
        return entity_ids[qid]

    def add_fact(triple: Triple, record: dict[str, Any]) -> int:
        if triple not in fact_ids:
            fact_ids[triple] = len(facts)
            facts.append(triple)
            records.append({"index": len(records), **record})
        return fact_ids[triple]

    answer_key = "new_answer" if edited else "answer"
    for position, case in enumerate(cases[:max_cases] if max_cases is not None else cases):
        triples, hops, labels = _chain(case, position, edited)
        subject_label = labels[0][0] if labels else _field(case, position, "requested_rewrite")[0].get("subject")
        hop_triples: list[Triple] = []
        for k, ((s, relation, o), hop) in enumerate(zip(triples, hops, strict=True)):
            s_label = labels[k][0] if labels else (subject_label if k == 0 else hops[k - 1].get("answer"))
            o_label = labels[k][2] if labels else hop.get("answer")
            triple = (entity(s, s_label), str(relation), entity(o, o_label))
            hop_triples.append(triple)
            add_fact(triple, {
                "kind": "hop", "case_id": case.get("case_id"), "fact": hop.get("cloze", "") + " " + str(hop["answer"]),
                "question": hop["question"], "answer": hop["answer"], "answer_alias": hop.get("answer_alias", []),
                "cloze": hop.get("cloze"), "question4": hop["question"], "answer4": hop["answer"],
            })
        relations = [t[1] for t in hop_triples]
        composed = (hop_triples[0][0], "/".join(relations), hop_triples[-1][2])
        questions = list(_field(case, position, "questions"))
        answer = _field(case, position, answer_key)
        target = add_fact(composed, {
            "kind": "composed", "case_id": case.get("case_id"), "fact": f"{questions[0]} {answer}",
            "questions": questions, "question": questions[0], "answer": answer,
            "answer_alias": case.get(f"{answer_key}_alias", []), "question4": questions[0], "answer4": answer,
            "hops": [fact_ids[t] for t in hop_triples],
        })
        if composition == "flat":
            ground_rules.append((tuple(hop_triples), composed))
        else:
            current = hop_triples[0]
            for k, hop in enumerate(hop_triples[1:], start=2):
                head = (hop_triples[0][0], "/".join(relations[:k]), hop[2])
                ground_rules.append(((current, hop), head))
                current = head
        if target not in targets:
            targets.append(target)

    kb = KnowledgeBase(
        facts=facts, entity_names=entity_names, genders=[None] * len(entity_names), rules=[],
        relation_conditions={}, relationship_records=records, biography_records=[], targets=targets,
        ground_rules=ground_rules, name=name, minimal_sets_origin=f"exact one-step ({composition})",
    )
    closure = kb.closure()
    for target in targets:
        exact = _exact_one_step_sets(closure, target)
        if exact is None:
            exact = find_minimal_sets(closure, target, kb.minimal_set_seeds)
        kb.minimal_sets[target] = exact
    return kb


def load_mquake(path: str | Path, **options: Any) -> KnowledgeBase:
    """:func:`build_mquake_kb` on a local MQuAKE JSON file (e.g. ``MQuAKE-CF-3k-v2.json``)."""
    path = Path(path)
    return build_mquake_kb(load_mquake_cases(path), name=options.pop("name", path.stem), **options)
