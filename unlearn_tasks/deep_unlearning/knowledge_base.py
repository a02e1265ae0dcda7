"""The Eval-DU knowledge base: facts, people, rules, targets and shipped minimal sets; loading and writing.

Two on-disk forms are read:

* the JSON directory (``family_graph.json``, ``family_relationships.json``, ``family_biographies.json``,
  ``family_rules.json``, ``subsample.json``, ``unlearn_minimal_sets.json``, ``us_population_distribution.json``),
  as in ``../shared/data/deep_unlearning`` and as written by :func:`write_evaldu_json`;
* the upstream release (``wrh14/deep_unlearning``: ``synthetic_data/*.pt`` torch pickles), read by a restricted
  unpickler that executes no pickled code (:mod:`.torch_pickle`).

Relationship fact ``i`` is edge ``i``: ``(source, relation, target)`` = "names[target] is names[source]'s
relation". Biography fact ``3*p + k`` is person ``p``'s birthyear / birthplace / job (k = 0, 1, 2).
"""

from __future__ import annotations

import json
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .closure import DeductiveClosure, GroundRule, Triple, deductive_closure
from .family_rules import FAMILY_RELATION_CONDITIONS, Rule, family_rules
from .family_rules import fix_rule_typos as _fix_rule_typos
from .minimal_sets import canonical_order, find_minimal_sets
from .torch_pickle import load_torch_file

BIOGRAPHY_ATTRIBUTES = ("birthyear", "birthplace", "job")
DEFAULT_MINIMAL_SET_SEEDS = 100

GRAPH_SEMANTICS = (
    "edge (source,target,relation) means: names[target] is names[source]'s <relation>; "
    "edge i <-> family_relationships[i]"
)
RULES_SEMANTICS = (
    "tuple (x, rel, y) means: var y is var x's <rel> (same as graph edges); rule: AND(left_tuples) => "
    "right_tuple; gender constraints of family_rule_raw.txt are NOT encoded here, they are enforced when "
    "deriving new edges (get_dc_edges_list)"
)
SUBSAMPLE_SEMANTICS = "unlearn_target_data_id k in 0..54 -> relationship fact id subsample[k]"
MINIMAL_SETS_SEMANTICS = (
    "key = relationship fact id (target); value = list of candidate minimal deep-unlearning sets (fact ids)"
)


@dataclass
class KnowledgeBase:
    """Facts (relationship triples), entities, rules and evaluation targets of one deep-unlearning benchmark."""

    facts: list[Triple]
    entity_names: list[str]
    genders: list[str | None]
    rules: list[Rule]
    relation_conditions: dict[str, tuple[str | None, str | None]]
    relationship_records: list[dict[str, Any]]
    biography_records: list[dict[str, Any]] = field(default_factory=list)
    targets: list[int] = field(default_factory=list)
    minimal_sets: dict[int, list[frozenset[int]]] = field(default_factory=dict)
    ground_rules: list[GroundRule] = field(default_factory=list)
    persons: list[dict[str, Any]] = field(default_factory=list)
    name: str = "evaldu"
    minimal_set_seeds: int = DEFAULT_MINIMAL_SET_SEEDS
    minimal_sets_origin: str = "release"
    _closure: DeductiveClosure | None = field(default=None, repr=False, compare=False)
    _computed_sets: dict[int, list[frozenset[int]]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.relationship_records) != len(self.facts):
            raise ValueError(
                f"{self.name}: {len(self.relationship_records)} relationship records for {len(self.facts)} facts; "
                "record i must describe fact (edge) i"
            )

    @property
    def n_relationships(self) -> int:
        """Number of relationship facts (the length of the relationships correctness vector)."""
        return len(self.facts)

    @property
    def n_biographies(self) -> int:
        """Number of biography facts (the length of the biographies correctness vector)."""
        return len(self.biography_records)

    def closure(self) -> DeductiveClosure:
        """The deductive closure of all relationship facts (computed once, then cached)."""
        if self._closure is None:
            self._closure = deductive_closure(
                self.facts, self.rules, self.genders, self.relation_conditions, self.ground_rules
            )
        return self._closure

    def fact_text(self, fact_id: int) -> str:
        """Human-readable statement of a relationship fact."""
        record = self.relationship_records[fact_id]
        if "fact" in record:
            return str(record["fact"])
        source, relation, target = self.facts[fact_id]
        return f"{self.entity_names[target]} is {self.entity_names[source]}'s {relation}."

    def check_target(self, target: Any) -> int:
        """Validate a target fact id and return it as ``int``; ``ValueError`` says what to pass instead."""
        if isinstance(target, str) and target.strip().lstrip("-").isdigit():
            target = int(target)
        try:
            if isinstance(target, bool):
                raise TypeError
            target = operator.index(target)  # int, numpy integer
        except TypeError:
            raise ValueError(f"target must be an integer relationship fact id, got {target!r}") from None
        if not 0 <= target < self.n_relationships:
            hint = f"; evaluation targets of {self.name}: {self.targets[:8]}..." if self.targets else ""
            raise ValueError(
                f"unknown target {target}: a target is a relationship fact id in 0..{self.n_relationships - 1} "
                f"(e.g. 272), not an index into the target list{hint}"
            )
        return target

    def candidate_minimal_sets(self, target: int) -> tuple[list[frozenset[int]], str]:
        """Candidate minimal deep-unlearning sets of ``target`` and where they come from.

        Shipped sets (source ``minimal_sets_origin``, ``"release"`` by default) are used when the knowledge
        base has them; otherwise they are computed
        with ``minimal_set_seeds`` seeds (``"computed:<n> seeds"``) and cached on this object.
        """
        target = self.check_target(target)
        if target in self.minimal_sets:
            return self.minimal_sets[target], self.minimal_sets_origin
        if target not in self._computed_sets:
            self._computed_sets[target] = find_minimal_sets(self.closure(), target, self.minimal_set_seeds)
        return self._computed_sets[target], f"computed:{self.minimal_set_seeds} seeds"


def evaluation_questions(kb: KnowledgeBase) -> list[dict[str, Any]]:
    """One item per fact to ask the model, relationships first then biographies, in fact order.

    Each item: ``kind`` ("relationship" | "biography"), ``index`` (position in its correctness vector),
    ``question`` (the release's ``question4``; the prompt is ``"Question: {question}\n"``), ``answer``
    (``answer4``) and ``aliases`` (other accepted answers; MQuAKE only).
    """
    items = []
    for kind, records in (("relationship", kb.relationship_records), ("biography", kb.biography_records)):
        for index, record in enumerate(records):
            items.append({"kind": kind, "index": index, "question": record["question4"],
                          "answer": str(record["answer4"]), "aliases": list(record.get("answer_alias") or [])})
    return items


# ----------------------------------------------------------------------------------------------- JSON form


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"missing file {path}; an Eval-DU JSON directory needs it") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None


def _rules_from_json(items: Sequence[dict[str, Any]]) -> list[Rule]:
    rules = []
    for position, item in enumerate(items):
        try:
            body = tuple((int(x), str(r), int(y)) for x, r, y in item["left_tuples"])
            x, r, y = item["right_tuple"]
            rules.append(Rule(body, (int(x), str(r), int(y)), int(item["num_var"]), int(item.get("id", position))))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"rule {position} is malformed ({error}): {item}") from None
    return rules


def load_evaldu_json(directory: str | Path, *, fix_rule_typos: bool = False) -> KnowledgeBase:
    """Load an Eval-DU knowledge base from a JSON directory (the shared-data / generator layout)."""
    directory = Path(directory)
    graph = _read_json(directory / "family_graph.json")
    for key in ("edges", "names", "persons"):
        if key not in graph:
            raise ValueError(f"{directory / 'family_graph.json'} lacks the key {key!r}")
    edges = sorted(graph["edges"], key=lambda e: e["id"])
    facts = [(int(e["source"]), str(e["relation"]), int(e["target"])) for e in edges]
    persons = graph["persons"]
    rules_path = directory / "family_rules.json"
    rules = _rules_from_json(_read_json(rules_path)["rules"]) if rules_path.exists() else family_rules()
    if fix_rule_typos:
        rules = [_fix_rule_typos(rule) for rule in rules]
    targets: list[int] = []
    if (directory / "subsample.json").exists():
        targets = [int(t) for t in _read_json(directory / "subsample.json")["subsample"]]
    minimal_sets: dict[int, list[frozenset[int]]] = {}
    if (directory / "unlearn_minimal_sets.json").exists():
        raw = _read_json(directory / "unlearn_minimal_sets.json")["minimal_sets"]
        minimal_sets = {int(t): canonical_order(sets) for t, sets in raw.items()}
    biographies_path = directory / "family_biographies.json"
    biographies = _read_json(biographies_path) if biographies_path.exists() else []
    return KnowledgeBase(
        facts=facts,
        entity_names=list(graph["names"]),
        genders=[p.get("gender") for p in sorted(persons, key=lambda p: p["id"])],
        rules=rules,
        relation_conditions=dict(FAMILY_RELATION_CONDITIONS),
        relationship_records=_read_json(directory / "family_relationships.json"),
        biography_records=biographies,
        targets=targets,
        minimal_sets=minimal_sets,
        persons=persons,
        name=directory.name,
    )


def _rule_to_json(rule: Rule, position: int) -> dict[str, Any]:
    return {
        "id": rule.rule_id if rule.rule_id >= 0 else position,
        "left_tuples": [list(atom) for atom in rule.body],
        "right_tuple": list(rule.head),
        "num_var": rule.num_vars,
    }


def write_evaldu_json(
    kb: KnowledgeBase,
    directory: str | Path,
    *,
    population: dict[str, int] | None = None,
    include_minimal_sets: bool = True,
) -> Path:
    """Write ``kb`` as an Eval-DU JSON directory readable by :func:`load_evaldu_json`; returns the directory.

    Minimal sets written are the shipped ones plus any computed so far; with ``include_minimal_sets`` the
    sets of every target are computed first (``kb.minimal_set_seeds`` seeds each).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    edges = [{"id": i, "source": s, "target": t, "relation": r} for i, (s, r, t) in enumerate(kb.facts)]
    dump = lambda name, data: (directory / name).write_text(json.dumps(data, indent=1), encoding="utf-8")  # noqa: E731
    dump("family_graph.json", {"semantics": GRAPH_SEMANTICS, "edges": edges, "names": kb.entity_names,
                               "persons": kb.persons})
    dump("family_relationships.json", kb.relationship_records)
    dump("family_biographies.json", kb.biography_records)
    dump("family_rules.json", {"semantics": RULES_SEMANTICS,
                               "rules": [_rule_to_json(rule, i) for i, rule in enumerate(kb.rules)]})
    dump("subsample.json", {"semantics": SUBSAMPLE_SEMANTICS, "subsample": kb.targets})
    if population is not None:
        dump("us_population_distribution.json", population)
    if include_minimal_sets:
        sets = {t: kb.candidate_minimal_sets(t)[0] for t in kb.targets}
        dump("unlearn_minimal_sets.json", {"semantics": MINIMAL_SETS_SEMANTICS,
                                           "minimal_sets": {str(t): [sorted(s) for s in v] for t, v in sets.items()}})
    return directory


# ------------------------------------------------------------------------------- upstream torch-pickle form


def _person_reference(value: Any, index_of: dict[int, int]) -> int | None:
    if value is None:
        return None
    if id(value) not in index_of:
        raise ValueError("a Person refers to a person that is not in person_list")
    return index_of[id(value)]


def _scalar(value: Any) -> Any:
    if hasattr(value, "tolist"):
        value = value.tolist()
    while isinstance(value, list) and len(value) == 1:
        value = value[0]
    return value


def _records_from_columns(columns: dict[str, list[Any]], path: Path) -> list[dict[str, Any]]:
    if not isinstance(columns, dict) or not columns:
        raise ValueError(f"{path}: expected a dict of equal-length lists")
    lengths = {len(v) for v in columns.values()}
    if len(lengths) != 1:
        raise ValueError(f"{path}: columns have different lengths {sorted(lengths)}")
    return [{key: _scalar(values[i]) for key, values in columns.items()} for i in range(lengths.pop())]


def load_evaldu_torch(directory: str | Path) -> KnowledgeBase:
    """Load the upstream release (its repository root or its ``synthetic_data`` folder) from torch pickles.

    Needs ``family-200-graph.pt``, ``family_relationships.pt``, ``family_biographies.pt`` and
    ``family_rule.pt``; ``subsample.pt``, ``unlearn_minimal_set/{id}.pt`` and ``us_population_distribution``
    are optional. No pickled code is executed.
    """
    root = Path(directory)
    data = root / "synthetic_data" if (root / "synthetic_data").is_dir() else root
    graph_path = data / "family-200-graph.pt"
    if not graph_path.exists():
        raise ValueError(f"missing {graph_path}; pass the upstream repository root or its synthetic_data folder")
    edge_list, edge_types, names, person_list = load_torch_file(graph_path)
    index_of = {id(person): i for i, person in enumerate(person_list)}
    population_path = next((p for p in (data / "us_population_distribution", data / "us_population_distribution.pt")
                            if p.exists()), None)
    states = list(load_torch_file(population_path)) if population_path else []
    persons = []
    for i, person in enumerate(person_list):
        attrs = person.__dict__
        place = _scalar(attrs.get("birthplace"))
        persons.append({
            "id": i, "name": str(names[i]), "gender": attrs.get("gender"),
            "birthyear": _scalar(attrs.get("age")), "birthplace_index": place,
            "birthplace": states[place] if isinstance(place, int) and place < len(states) else None,
            "job": attrs.get("job"), "generation": _scalar(attrs.get("generation")),
            **{key: _person_reference(attrs.get(key), index_of) for key in ("father", "mother", "husband", "wife")},
            "children": [_person_reference(c, index_of) for c in attrs.get("children") or []],
        })
    facts = [(int(_scalar(s)), str(r), int(_scalar(t))) for (s, t), r in zip(edge_list, edge_types, strict=True)]
    relationships = _records_from_columns(load_torch_file(data / "family_relationships.pt"),
                                          data / "family_relationships.pt")
    for i, record in enumerate(relationships):
        s, r, t = facts[i]
        record["index"] = i
        record["edge"] = {"source": s, "target": t, "relation": r, "source_name": names[s], "target_name": names[t]}
    biographies = _records_from_columns(load_torch_file(data / "family_biographies.pt"),
                                        data / "family_biographies.pt")
    for i, record in enumerate(biographies):
        record.update(index=i, person_id=i // 3, attribute=BIOGRAPHY_ATTRIBUTES[i % 3])
    pickled_rules = load_torch_file(data / "family_rule.pt")
    rules = _rules_from_json([{**rule.__dict__, "id": i} for i, rule in enumerate(pickled_rules)])
    targets: list[int] = []
    if (data / "subsample.pt").exists():
        targets = [int(t) for t in np.atleast_1d(np.asarray(load_torch_file(data / "subsample.pt")))]
    minimal_sets = {
        t: canonical_order(load_torch_file(data / "unlearn_minimal_set" / f"{t}.pt"))
        for t in targets if (data / "unlearn_minimal_set" / f"{t}.pt").exists()
    }
    return KnowledgeBase(
        facts=facts, entity_names=[str(n) for n in names], genders=[p["gender"] for p in persons], rules=rules,
        relation_conditions=dict(FAMILY_RELATION_CONDITIONS), relationship_records=relationships,
        biography_records=biographies, targets=targets, minimal_sets=minimal_sets, persons=persons,
        name=root.name,
    )


def load_evaldu(path: str | Path, **kwargs: Any) -> KnowledgeBase:
    """Load Eval-DU from a JSON directory or from the upstream torch-pickle release (auto-detected)."""
    path = Path(path)
    if (path / "family_graph.json").exists():
        return load_evaldu_json(path, **kwargs)
    if (path / "family-200-graph.pt").exists() or (path / "synthetic_data" / "family-200-graph.pt").exists():
        if kwargs:
            raise ValueError(f"options {sorted(kwargs)} apply to JSON directories only")
        return load_evaldu_torch(path)
    raise ValueError(
        f"{path} holds no Eval-DU knowledge base: expected family_graph.json (JSON layout) or "
        "synthetic_data/family-200-graph.pt (upstream release)"
    )
