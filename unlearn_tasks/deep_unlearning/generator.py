"""Seeded generator of Eval-DU-style knowledge bases (families over 4 generations, biographies, rules).

The generated family network follows the release's shape: founding couples (generation 0) have 1-3
children; a child in generations 1-2 marries, with probability ``marriage_rate``, a spouse from outside the
family (no parents in the knowledge base), and the couple has children in turn, down to generation 3. Wives
keep their surname; children take their father's. Birth years: founders 1898-1919, children 19-36 years after
their father, spouses within a few years of each other. Birthplaces are US states sampled by 2020 population,
or inherited from a parent (as most are in the release); jobs are sampled from a fixed list.

The true relation set (parents, children, spouses, siblings, blood uncles/aunts, nephews/nieces) is exactly
what the 48 family rules can close; the knowledge base keeps each true fact with a per-relation probability
(:data:`DEFAULT_INCLUSION`, calibrated on the release: all parent and spouse facts, about 3/4 of the child
facts, 2/3 of the sibling facts, 1/3 of niece/aunt facts, 1/6 of uncle/nephew facts). Targets are sampled
among facts that the rest of the knowledge base can re-derive, so every target needs deep unlearning.
Everything depends only on ``seed`` (``numpy.random.default_rng``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .family_rules import FAMILY_RELATION_CONDITIONS, FAMILY_RELATIONS, family_rules
from .knowledge_base import BIOGRAPHY_ATTRIBUTES, KnowledgeBase, write_evaldu_json

US_STATE_POPULATION_2020: dict[str, int] = {
    "Alabama": 5024279, "Alaska": 733391, "Arizona": 7151502, "Arkansas": 3011524, "California": 39538223,
    "Colorado": 5773714, "Connecticut": 3605944, "Delaware": 989948, "Florida": 21538187, "Georgia": 10711908,
    "Hawaii": 1455271, "Idaho": 1839106, "Illinois": 12812508, "Indiana": 6785528, "Iowa": 3190369,
    "Kansas": 2937880, "Kentucky": 4505836, "Louisiana": 4657757, "Maine": 1362359, "Maryland": 6177224,
    "Massachusetts": 7029917, "Michigan": 10077331, "Minnesota": 5706494, "Mississippi": 2961279,
    "Missouri": 6154913, "Montana": 1084225, "Nebraska": 1961504, "Nevada": 3104614, "New Hampshire": 1377529,
    "New Jersey": 9288994, "New Mexico": 2117522, "New York": 20201249, "North Carolina": 10439388,
    "North Dakota": 779094, "Ohio": 11799448, "Oklahoma": 3959353, "Oregon": 4237256, "Pennsylvania": 13002700,
    "Rhode Island": 1097379, "South Carolina": 5118425, "South Dakota": 886667, "Tennessee": 6910840,
    "Texas": 29145505, "Utah": 3271616, "Vermont": 643077, "Virginia": 8631393, "Washington": 7705281,
    "West Virginia": 1793716, "Wisconsin": 5893718, "Wyoming": 576851,
}

FEMALE_NAMES = (
    "Abigail Ada Adeline Alice Amara Amelia Anna Aria Audrey Aurora Bella Brooke Camila Chloe Clara Daisy "
    "Delilah Eleanor Elena Eliza Ella Emilia Emma Esme Eva Evelyn Faith Fiona Freya Gemma Grace Hannah Harper "
    "Hazel Iris Isla Ivy Jade Josephine Julia June Kaia Kinsley Layla Leah Lila Lily Lucy Luna Mabel Maya "
    "Mila Naomi Nora Olive Olivia Paisley Penelope Piper Quinn Rose Ruby Sadie Sage Sara Scarlett Sienna "
    "Sophia Stella Talia Tessa Thea Valerie Vera Violet Willa Wren Zara Zoe"
).split()
MALE_NAMES = (
    "Aaron Adam Adrian Alan Albert Arthur Asher Austin Beau Benjamin Bennett Caleb Calvin Carter Cole Colin "
    "Daniel David Declan Dominic Dylan Easton Edgar Edward Eli Elliot Ethan Everett Felix Finn Gabriel George "
    "Graham Harold Harvey Henry Hudson Ian Isaac Jack Jasper Jonah Jude Julian Kai Leo Levi Lincoln Lucas "
    "Luke Malcolm Marcus Mason Miles Nathan Noah Oliver Oscar Owen Parker Peter Philip Quentin Reid Rhys "
    "Rowan Ryan Samuel Silas Simon Theo Thomas Tobias Victor Walter Wesley Xavier Zane"
).split()
SURNAMES = (
    "Abbott Adler Aldridge Archer Ashford Bailey Barker Barlow Bates Beck Bell Bennett Bishop Blake Bowen "
    "Boyd Bradley Brennan Brooks Burke Byrne Cameron Carver Chambers Chandler Clark Cole Conway Cooper Crane "
    "Cross Dalton Davies Dawson Dixon Doyle Drake Dunn Elliott Ellis Emerson Farley Fisher Fleming Fletcher "
    "Ford Foster Fox Frost Gallagher Garner Gibson Gordon Graves Griffin Hale Hampton Hardy Harper Hayes "
    "Hendricks Holland Holt Hudson Hunt Ingram Jarvis Keller Kemp Kirby Knight Lambert Lane Lawson Lowe Lyons "
    "Mack Manning Marsh Mason Maxwell Mercer Miles Morgan Nash Norris Osborne Owens Palmer Parks Pearce "
    "Pierce Porter Quinn Ramsey Reeves Riley Rowe Russell Sawyer Sharp Shaw Sloan Spencer Stone Sutton "
    "Thornton Tucker Turner Vance Wade Walsh Ward Watts Webb Wells Whitaker Wolfe Wright Yates York"
).split()
JOBS = (
    "Accountant", "Architect", "Baker", "Bank Teller", "Bookkeeper", "Bus Driver", "Carpenter", "Cashier",
    "Chef", "Chemist", "Civil Engineer", "Clerk", "Dentist", "Doctor", "Electrician", "Farmer", "Firefighter",
    "Florist", "Graphic Designer", "Hairdresser", "Journalist", "Judge", "Lawyer", "Librarian", "Machinist",
    "Mechanic", "Musician", "Nurse", "Painter", "Pharmacist", "Photographer", "Physicist", "Pilot", "Plumber",
    "Police Officer", "Postman", "Professor", "Real Estate Agent", "Receptionist", "Salesman", "Scientist",
    "Secretary", "Software Developer", "Stenographer", "Surveyor", "Tailor", "Taxi Driver", "Teacher",
    "Translator", "Truck Driver", "Veterinarian", "Waiter", "Welder", "Writer",
)

#: probability that a true relation fact of each type is put in the knowledge base
DEFAULT_INCLUSION: dict[str, float] = {
    "father": 1.0, "mother": 1.0, "husband": 1.0, "wife": 1.0, "child": 0.77, "brother": 0.68,
    "sister": 0.68, "niece": 0.3, "aunt": 0.3, "uncle": 0.15, "nephew": 0.15,
}
MAX_GENERATION = 3


@dataclass
class _Person:
    id: int
    first: str
    surname: str
    gender: str
    generation: int
    birthyear: int
    birthplace_index: int
    job: str
    father: int | None = None
    mother: int | None = None
    spouse: int | None = None
    children: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.first} {self.surname}"


class _FamilyBuilder:
    """Grows family trees until ``n_people`` persons exist."""

    def __init__(self, n_people: int, rng: np.random.Generator, marriage_rate: float, states: list[str],
                 weights: np.ndarray) -> None:
        self.n_people, self.rng, self.marriage_rate = n_people, rng, marriage_rate
        self.states, self.weights = states, weights
        self.people: list[_Person] = []
        self.names: set[str] = set()

    def full(self) -> bool:
        return len(self.people) >= self.n_people

    def _pick(self, options: tuple[str, ...] | list[str]) -> str:
        return options[int(self.rng.integers(len(options)))]

    def _unique_first(self, gender: str, surname: str) -> str:
        pool = FEMALE_NAMES if gender == "female" else MALE_NAMES
        for attempt in range(200):
            first = self._pick(pool)
            if attempt >= 50:  # crowded: add a middle initial
                first = f"{first} {chr(ord('A') + int(self.rng.integers(26)))}."
            if f"{first} {surname}" not in self.names:
                return first
        return f"{self._pick(pool)} {len(self.people)}"

    def add(self, gender: str, generation: int, surname: str, birthyear: int, birthplace: int | None = None,
            father: int | None = None, mother: int | None = None) -> _Person:
        if birthplace is None:
            birthplace = int(self.rng.choice(len(self.states), p=self.weights))
        first = self._unique_first(gender, surname)
        person = _Person(len(self.people), first, surname, gender, generation, birthyear, birthplace,
                         self._pick(JOBS), father, mother)
        self.people.append(person)
        self.names.add(person.name)
        for parent in (father, mother):
            if parent is not None:
                self.people[parent].children.append(person.id)
        return person

    def marry(self, person: _Person) -> _Person | None:
        if self.full():
            return None
        gender = "female" if person.gender == "male" else "male"
        spouse_year = person.birthyear + int(self.rng.integers(-4, 5))
        spouse = self.add(gender, person.generation, self._pick(SURNAMES), spouse_year)
        person.spouse, spouse.spouse = spouse.id, person.id
        return spouse

    def grow_tree(self) -> None:
        founder = self.add("male", 0, self._pick(SURNAMES), 1898 + int(self.rng.integers(0, 22)))
        couples = [(founder, self.marry(founder))]
        while couples and not self.full():
            next_couples = []
            for member, spouse in couples:
                if spouse is None:
                    continue
                father, mother = (member, spouse) if member.gender == "male" else (spouse, member)
                if father.generation >= MAX_GENERATION:
                    continue
                for _ in range(int(self.rng.integers(1, 4))):
                    if self.full():
                        return
                    gender = "male" if self.rng.random() < 0.5 else "female"
                    inherit = self.rng.random() < 0.9
                    place = (father if self.rng.random() < 0.5 else mother).birthplace_index if inherit else None
                    child = self.add(gender, father.generation + 1, father.surname,
                                     father.birthyear + int(self.rng.integers(19, 37)), place, father.id, mother.id)
                    if child.generation < MAX_GENERATION and self.rng.random() < self.marriage_rate:
                        next_couples.append((child, self.marry(child)))
            couples = next_couples


def true_family_relations(persons: Sequence[Mapping[str, Any]]) -> list[tuple[int, str, int]]:
    """Every relation the 48 rules can close (parents, children, spouses, siblings, blood uncles/aunts,
    nephews/nieces) among ``persons`` (``family_graph.json`` dicts), as sorted ``(source, relation, target)``."""
    by_id = {int(p["id"]): p for p in persons}
    families: dict[tuple[Any, Any], list[int]] = defaultdict(list)  # parents -> children (the parent fields
    for person in persons:  # are authoritative: the release's "children" lists are incomplete)
        if person["father"] is not None or person["mother"] is not None:
            families[(person["father"], person["mother"])].append(int(person["id"]))
    truth: set[tuple[int, str, int]] = set()

    def gendered(person_id: int, male: str, female: str) -> str:
        return male if by_id[person_id]["gender"] == "male" else female

    def siblings(person: Mapping[str, Any]) -> list[int]:
        if person["father"] is None and person["mother"] is None:
            return []
        return [c for c in families[(person["father"], person["mother"])] if c != person["id"]]

    for person in persons:
        pid = int(person["id"])
        for key in ("husband", "wife"):
            if person.get(key) is not None:
                truth.add((pid, key, int(person[key])))
        for parent in (person["father"], person["mother"]):
            if parent is None:
                continue
            truth.add((parent, "child", pid))
            truth.add((pid, gendered(parent, "father", "mother"), parent))
            for relative in siblings(by_id[parent]):
                truth.add((pid, gendered(relative, "uncle", "aunt"), relative))
                truth.add((relative, gendered(pid, "nephew", "niece"), pid))
        for sibling in siblings(person):
            truth.add((pid, gendered(sibling, "brother", "sister"), sibling))
    return sorted(truth, key=lambda t: (t[0], FAMILY_RELATIONS.index(t[1]), t[2]))


def _relationship_record(index: int, triple: tuple[int, str, int], names: list[str], other: str) -> dict[str, Any]:
    source, relation, target = triple
    s, t = names[source], names[target]
    return {
        "index": index, "fact": f"{t} is {s}'s {relation}.", "question": f"{t} is {s}'s ", "answer": relation,
        "question2": f"Is {t} {s}'s {relation}?", "answer2": "yes",
        "question3": f"Is {t} {s}'s {other}?", "answer3": "no",
        "question4": f"Who is {t} to {s}?", "answer4": relation,
        "edge": {"source": source, "target": target, "relation": relation, "source_name": s, "target_name": t},
    }


def _biography_records(people: list[_Person], states: list[str]) -> list[dict[str, Any]]:
    records = []
    for person in people:
        values = (str(person.birthyear), f"{states[person.birthplace_index]} state", person.job)
        for attribute, value in zip(BIOGRAPHY_ATTRIBUTES, values, strict=True):
            records.append({
                "index": len(records), "fact": f"The {attribute} of {person.name} is {value}.",
                "question": f"The {attribute} of {person.name} is", "answer": value,
                "question4": f"What is the {attribute} of {person.name}?", "answer4": value,
                "person_id": person.id, "attribute": attribute,
            })
    return records


def generate_evaldu(
    n_people: int = 100,
    seed: int = 0,
    n_targets: int = 55,
    inclusion: dict[str, float] | None = None,
    marriage_rate: float = 0.6,
    population: dict[str, int] | None = None,
    minimal_set_seeds: int = 100,
) -> KnowledgeBase:
    """A new Eval-DU-style knowledge base with ``n_people`` people; identical for identical arguments."""
    if n_people < 4:
        raise ValueError(f"n_people must be at least 4, got {n_people}")
    rng = np.random.default_rng(seed)
    population = population or US_STATE_POPULATION_2020
    states = list(population)
    weights = np.array([population[s] for s in states], dtype=float)
    builder = _FamilyBuilder(n_people, rng, marriage_rate, states, weights / weights.sum())
    while not builder.full():
        builder.grow_tree()
    people = builder.people
    persons = [{
        "id": p.id, "name": p.name, "gender": p.gender, "birthyear": p.birthyear,
        "birthplace_index": p.birthplace_index, "birthplace": states[p.birthplace_index], "job": p.job,
        "generation": p.generation, "father": p.father, "mother": p.mother,
        "husband": p.spouse if p.spouse is not None and p.gender == "female" else None,
        "wife": p.spouse if p.spouse is not None and p.gender == "male" else None,
        "children": list(p.children),
    } for p in people]
    probabilities = {**DEFAULT_INCLUSION, **(inclusion or {})}
    truth = true_family_relations(persons)
    keep = rng.random(len(truth)) < np.array([probabilities[r] for _, r, _ in truth])
    facts = [triple for triple, kept in zip(truth, keep, strict=True) if kept]
    order = rng.permutation(len(facts))  # the release lists facts in no particular order
    facts = [facts[i] for i in order]
    names = [p.name for p in people]
    others = [FAMILY_RELATIONS[int(rng.integers(len(FAMILY_RELATIONS)))] for _ in facts]
    others = [o if o != f[1] else ("uncle" if f[1] != "uncle" else "aunt") for o, f in zip(others, facts, strict=True)]
    kb = KnowledgeBase(
        facts=facts, entity_names=names, genders=[p.gender for p in people], rules=family_rules(),
        relation_conditions=dict(FAMILY_RELATION_CONDITIONS),
        relationship_records=[
            _relationship_record(i, fact, names, other) for i, (fact, other) in enumerate(zip(facts, others, strict=True))
        ],
        biography_records=_biography_records(people, states), persons=persons,
        name=f"generated-{n_people}-seed{seed}", minimal_set_seeds=minimal_set_seeds,
    )
    if n_targets:
        closure = kb.closure()
        for candidate in rng.permutation(len(facts)).tolist():  # first n_targets re-derivable facts
            if closure.is_derivable(candidate, [candidate]):
                kb.targets.append(candidate)
                if len(kb.targets) == n_targets:
                    break
    return kb


def write_generated_evaldu(directory: str | Path, n_people: int = 100, seed: int = 0, *,
                           include_minimal_sets: bool = True, **options: Any) -> KnowledgeBase:
    """Generate a knowledge base and write it as an Eval-DU JSON directory; returns the knowledge base."""
    kb = generate_evaldu(n_people, seed, **options)
    write_evaldu_json(kb, directory, population=options.get("population") or US_STATE_POPULATION_2020,
                      include_minimal_sets=include_minimal_sets)
    return kb
