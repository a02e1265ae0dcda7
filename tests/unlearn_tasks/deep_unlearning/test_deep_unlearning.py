"""Deep-unlearning engine on hand-made knowledge bases: closure, minimal sets, metrics, generator, MQuAKE.

Offline and self-contained (no shared data needed); the release-data tests are in
test_deep_unlearning_release.py.
"""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from unlearn_tasks.deep_unlearning import (
    FAMILY_RELATION_CONDITIONS,
    KnowledgeBase,
    build_mquake_kb,
    deductive_closure,
    family_rules,
    find_minimal_set,
    find_minimal_sets,
    generate_evaldu,
    is_minimal_deep_unlearning_set,
    load_evaldu,
    load_mquake,
    score,
    score_targets,
    sweep_summary,
    write_evaldu_json,
)
from unlearn_tasks.deep_unlearning.generator import true_family_relations
from unlearn_tasks.deep_unlearning.metrics import accuracy_recall_auc
from unlearn_tasks.deep_unlearning.plot import plot_recall_accuracy
from unlearn_tasks.deep_unlearning.torch_pickle import load_torch_file

# Adam (0, m) and Beth (1, f) are married; Carl (2, m) and Dana (3, f) are their children.
NAMES = ["Adam Gray", "Beth Gray", "Carl Gray", "Dana Gray"]
GENDERS = ["male", "female", "male", "female"]
TINY_FACTS = [
    (0, "wife", 1),  # f0: Beth is Adam's wife
    (2, "father", 0),  # f1: Adam is Carl's father   <- the target
    (3, "father", 0),  # f2: Adam is Dana's father
    (2, "sister", 3),  # f3: Dana is Carl's sister
]
TINY_DERIVED = {
    (1, "husband", 0), (0, "child", 2), (0, "child", 3), (2, "mother", 1),
    (3, "mother", 1), (1, "child", 2), (1, "child", 3), (3, "brother", 2),
}


def tiny_kb(genders: list[str] = GENDERS) -> KnowledgeBase:
    records = [{"fact": f"{NAMES[t]} is {NAMES[s]}'s {r}.", "question4": f"Who is {NAMES[t]} to {NAMES[s]}?",
                "answer4": r} for s, r, t in TINY_FACTS]
    bios = [{"fact": f"bio {i}", "question4": f"q{i}", "answer4": str(i)} for i in range(4)]
    return KnowledgeBase(facts=list(TINY_FACTS), entity_names=NAMES, genders=list(genders), rules=family_rules(),
                         relation_conditions=dict(FAMILY_RELATION_CONDITIONS), relationship_records=records,
                         biography_records=bios, targets=[1], name="tiny")


# ------------------------------------------------------------------------------------------- closure


def test_tiny_closure_matches_hand_derivation():
    closure = tiny_kb().closure()
    assert closure.facts[:4] == TINY_FACTS
    assert set(closure.facts[4:]) == TINY_DERIVED
    assert closure.n_facts == 12 and len(set(closure.facts)) == 12


def test_gender_conditions_and_self_loops():
    # a lone "Carl is Beth's child": Beth is female, so she is Carl's mother, never his father
    closure = deductive_closure([(1, "child", 2)], family_rules(), GENDERS, FAMILY_RELATION_CONDITIONS)
    assert (2, "mother", 1) in closure.fact_ids and (2, "father", 1) not in closure.fact_ids
    # swapping Carl's gender turns "Carl is Dana's brother" into "Carl is Dana's sister"
    closure = tiny_kb(["male", "female", "female", "female"]).closure()
    assert (3, "sister", 2) in closure.fact_ids and (3, "brother", 2) not in closure.fact_ids
    assert all(s != t for s, _, t in tiny_kb().closure().facts)


def test_closure_of_subset_and_derivability():
    closure = tiny_kb().closure()
    assert closure.is_derivable(1, removed_kb=[1])  # from f2 + f3 (Carl is Dana's brother; Dana's father)
    assert not closure.is_derivable(1, removed_kb=[1, 2])
    assert not closure.is_derivable(1, removed_kb=[1, 3])
    mask = closure.closure_of([0])
    assert {closure.facts[i] for i in np.flatnonzero(mask)} == {(0, "wife", 1), (1, "husband", 0)}


# -------------------------------------------------------------------------------------- minimal sets


def test_tiny_minimal_sets_are_exact():
    closure = tiny_kb().closure()
    assert find_minimal_sets(closure, 1, 20) == [frozenset({1, 2}), frozenset({1, 3})]
    assert is_minimal_deep_unlearning_set(closure, 1, {1, 2})
    assert not is_minimal_deep_unlearning_set(closure, 1, {0, 1, 2})  # f0 is superfluous
    assert not is_minimal_deep_unlearning_set(closure, 1, {1})  # target still derivable


def test_minimal_sets_deterministic_minimal_and_deduplicated():
    kb = generate_evaldu(60, seed=5, n_targets=4)
    closure = kb.closure()
    for target in kb.targets:
        sets = find_minimal_sets(closure, target, 12)
        assert sets == find_minimal_sets(closure, target, 12)
        assert len(sets) == len(set(sets))
        assert sets == sorted(sets, key=lambda s: (len(s), sorted(s)))
        for candidate in sets:
            assert target in candidate and max(candidate) < closure.n_kb
            assert is_minimal_deep_unlearning_set(closure, target, candidate)
            for member in candidate:  # removing any one fact from the set re-enables the deduction
                assert closure.is_derivable(target, candidate - {member})
        assert find_minimal_set(closure, target, 3) == find_minimal_set(closure, target, 3)


# -------------------------------------------------------------------------------------------- metrics


@pytest.mark.parametrize(
    ("relationships", "expected"),
    [
        # forgot f1, f2: M*={1,2}: recall 1, acc_rel 1; kept {f0, f3} cannot derive f1
        ([True, False, False, True], {"success_du": 1.0, "recall": 1.0, "acc_relationships": 1.0,
                                      "acc_all": (0.75 * 4 + 1.0 * 2) / 6, "best_minimal_set": [1, 2]}),
        # forgot f1 only: both sets recall .5 and acc 1 -> tie broken by sorted ids; f2+f3 re-derive f1
        ([True, False, True, True], {"success_du": 0.0, "recall": 0.5, "acc_relationships": 1.0,
                                     "acc_all": (0.75 * 4 + 1.0 * 2) / 6, "best_minimal_set": [1, 2]}),
        # forgot f0, f1, f3: M*={1,3}: recall 1, acc_rel = 1 - 1/2
        ([False, False, True, False], {"success_du": 1.0, "recall": 1.0, "acc_relationships": 0.5,
                                       "acc_all": (0.75 * 4 + 0.5 * 2) / 6, "best_minimal_set": [1, 3]}),
    ],
)
def test_score_hand_computed(relationships, expected):
    result = score(relationships, [True, True, False, True], 1, tiny_kb())
    assert result["acc_biographies"] == 0.75
    for key, value in expected.items():
        assert result[key] == pytest.approx(value) if isinstance(value, float) else result[key] == value
    json.dumps(result)


def test_tie_break_prefers_higher_accuracy_then_smaller_set():
    from unlearn_tasks.deep_unlearning.metrics import best_matching_set

    forgotten = np.array([True, True, False, False, True, False])
    # {0,1} and {0,4}: recall 1, acc_rel 1 - 1/4 (one forgotten fact outside); {0,1,4}: recall 1, acc_rel 1
    sets = [frozenset({0, 4}), frozenset({0, 1}), frozenset({0, 1, 4})]
    best, recall, accuracy = best_matching_set(forgotten, sets)
    assert (sorted(best), recall, accuracy) == ([0, 1, 4], 1.0, 1.0)  # the larger set has the best accuracy
    best, _, _ = best_matching_set(forgotten, sets[:2])
    assert sorted(best) == [0, 1]  # equal recall and accuracy: lexicographically smallest


def test_bad_inputs_raise_clear_errors():
    kb = tiny_kb()
    good_rel, good_bio = [True] * 4, [True] * 4
    with pytest.raises(ValueError, match=r"relationships has 3 entries; expected 4"):
        score([True] * 3, good_bio, 1, kb)
    with pytest.raises(ValueError, match=r"biographies has 5 entries; expected 4"):
        score(good_rel, [True] * 5, 1, kb)
    with pytest.raises(ValueError, match=r"unknown target 4: a target is a relationship fact id in 0\.\.3"):
        score(good_rel, good_bio, 4, kb)
    with pytest.raises(ValueError, match=r"unknown target -1"):
        score(good_rel, good_bio, -1, kb)
    with pytest.raises(ValueError, match=r"integer relationship fact id"):
        score(good_rel, good_bio, "two", kb)
    with pytest.raises(ValueError, match=r"booleans"):
        score([True, 2, True, True], good_bio, 1, kb)
    with pytest.raises(ValueError, match=r"list of booleans"):
        score("TTTT", good_bio, 1, kb)
    with pytest.raises(ValueError, match=r"lacks \['success_du'\]"):
        sweep_summary([{"target": 1, "recall": 1.0, "acc_all": 1.0}])
    assert score([1, 0, 0, 1], [1, 1, 0, 1], "1", kb)["recall"] == 1.0  # 0/1 and numeric strings accepted


def test_sweep_summary_hand_computed():
    scores = [
        {"target": 1, "recall": 0.5, "acc_all": 0.9, "success_du": 0.0},
        {"target": 1, "recall": 0.9, "acc_all": 0.7, "success_du": 1.0},
        {"target": 2, "recall": 1.0, "acc_all": 0.85, "success_du": 1.0},
    ]
    summary = sweep_summary(scores)
    assert summary["per_target"]["1"] == pytest.approx(
        {"success_du_at_acc": 0.0, "recall_at_acc": 0.5, "acc_at_recall": 0.7, "ar_auc": 0.5 * 0.9 + 0.4 * 0.7})
    assert summary["per_target"]["2"] == pytest.approx(
        {"success_du_at_acc": 1.0, "recall_at_acc": 1.0, "acc_at_recall": 0.85, "ar_auc": 0.85})
    assert summary["success_du_at_acc"] == pytest.approx(0.5)
    assert summary["recall_at_acc"] == pytest.approx(0.75)
    assert summary["acc_at_recall"] == pytest.approx(0.775)
    assert summary["ar_auc"] == pytest.approx((0.73 + 0.85) / 2)
    assert summary["num_targets"] == 2 and summary["num_points"] == 3
    assert accuracy_recall_auc([(0.0, 1.0), (1.0, 0.0)]) == 0.0
    assert accuracy_recall_auc([(0.0, 1.0), (1.0, 1.0)]) == 1.0


def test_plot_writes_png(tmp_path):
    scores = [{"target": 1, "recall": r, "acc_all": 1 - r / 2, "success_du": float(r == 1)} for r in (0.2, 0.6, 1.0)]
    path = plot_recall_accuracy({"GA": scores, "NPO": scores[:2]}, tmp_path / "ra.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------------------ generator


def test_generator_is_deterministic_by_seed():
    first, again, other = generate_evaldu(80, seed=11), generate_evaldu(80, seed=11), generate_evaldu(80, seed=12)
    assert first.facts == again.facts and first.targets == again.targets
    assert first.relationship_records == again.relationship_records
    assert first.biography_records == again.biography_records and first.persons == again.persons
    assert first.facts != other.facts


def test_generated_kb_is_consistent_and_round_trips(tmp_path):
    kb = generate_evaldu(120, seed=2, n_targets=6, minimal_set_seeds=8)
    assert len(kb.persons) == 120 and kb.n_biographies == 360
    assert {p["generation"] for p in kb.persons} == {0, 1, 2, 3}
    truth = set(true_family_relations(kb.persons))
    closure = kb.closure()
    assert set(kb.facts) <= truth and set(closure.facts) <= truth  # the rules derive only true relations
    assert len(kb.targets) == 6 and all(closure.is_derivable(t, [t]) for t in kb.targets)
    assert len(set(kb.entity_names)) == 120
    write_evaldu_json(kb, tmp_path / "gen")
    loaded = load_evaldu(tmp_path / "gen")
    assert loaded.facts == kb.facts and loaded.targets == kb.targets
    assert loaded.genders == kb.genders and loaded.relationship_records == kb.relationship_records
    assert loaded.minimal_sets == {t: kb.candidate_minimal_sets(t)[0] for t in kb.targets}
    rel = [i % 3 != 0 for i in range(kb.n_relationships)]
    results = score_targets(rel, [True] * kb.n_biographies, loaded)
    assert [r["target"] for r in results] == kb.targets
    assert all(r["minimal_sets_source"] == "release" for r in results)


# -------------------------------------------------------------------------------------------- MQuAKE


def _hop(question, answer, cloze):
    return {"question": question, "cloze": cloze, "answer": answer, "answer_alias": []}


MQUAKE_FIXTURE = [
    {"case_id": 1, "requested_rewrite": [{"subject": "Dudley Town F.C.", "relation_id": "P641"}],
     "questions": ["Which country did the sport of Dudley Town F.C. originate from?", "q2", "q3"],
     "answer": "England", "answer_alias": ["ENG"], "new_answer": "India", "new_answer_alias": [],
     "single_hops": [_hop("Which sport is Dudley Town F.C. associated with?", "association football",
                          "Dudley Town F.C. is associated with the sport of"),
                     _hop("Which country did association football originate in?", "England",
                          "association football was created in the country of")],
     "new_single_hops": [],
     "orig": {"triples": [["Q5311995", "P641", "Q2736"], ["Q2736", "P495", "Q21"]],
              "triples_labeled": [["Dudley Town F.C.", "sport", "association football"],
                                  ["association football", "country of origin", "England"]],
              "new_triples": [], "new_triples_labeled": []}},
    {"case_id": 2, "requested_rewrite": [{"subject": "Dudley Town F.C.", "relation_id": "P641"}],
     "questions": ["What is the capital of the country where Dudley Town F.C.'s sport originated?", "q2", "q3"],
     "answer": "London", "answer_alias": ["London UK"], "new_answer": "Oderzo", "new_answer_alias": [],
     "single_hops": [_hop("Which sport is Dudley Town F.C. associated with?", "association football",
                          "Dudley Town F.C. is associated with the sport of"),
                     _hop("Which country did association football originate in?", "England",
                          "association football was created in the country of"),
                     _hop("What is the capital of England?", "London", "The capital of England is")],
     "new_single_hops": [],
     "orig": {"triples": [["Q5311995", "P641", "Q2736"], ["Q2736", "P495", "Q21"], ["Q21", "P36", "Q84"]],
              "triples_labeled": [], "new_triples": [], "new_triples_labeled": []}},
    {"case_id": 3, "requested_rewrite": [{"subject": "Ellie Kemper", "relation_id": "P27"}],
     "questions": ["What is the capital of the country of citizenship of Ellie Kemper?", "q2", "q3"],
     "answer": "Washington, D.C.", "answer_alias": [], "new_answer": "Ottawa", "new_answer_alias": [],
     "single_hops": [_hop("What is the country of citizenship of Ellie Kemper?", "United States of America",
                          "Ellie Kemper is a citizen of"),
                     _hop("What is the capital of United States of America?", "Washington, D.C.",
                          "The capital of United States of America is")],
     "new_single_hops": [],
     "orig": {"triples": [["Q3430", "P27", "Q30"], ["Q30", "P36", "Q61"]], "triples_labeled": [],
              "new_triples": [], "new_triples_labeled": []}},
]


def test_mquake_one_step_rules_and_exact_minimal_sets(tmp_path):
    path = tmp_path / "MQuAKE-fixture.json"
    path.write_text(json.dumps(MQUAKE_FIXTURE))
    kb = load_mquake(path)
    assert kb.targets == [2, 4, 7] and kb.n_relationships == 8 and kb.n_biographies == 0
    assert [r["kind"] for r in kb.relationship_records] == ["hop", "hop", "composed", "hop", "composed", "hop",
                                                            "hop", "composed"]
    assert kb.relationship_records[4]["answer4"] == "London" and kb.relationship_records[4]["hops"] == [0, 1, 3]
    assert kb.entity_names[0] == "Dudley Town F.C." and kb.facts[2][1] == "P641/P495"
    assert kb.minimal_sets == {2: [frozenset({0, 2}), frozenset({1, 2})],
                               4: [frozenset({0, 4}), frozenset({1, 4}), frozenset({3, 4})],
                               7: [frozenset({5, 7}), frozenset({6, 7})]}
    closure = kb.closure()
    for target, sets in kb.minimal_sets.items():
        assert sets == find_minimal_sets(closure, target, 30)  # the generic finder agrees with the exact sets
    forgot_capital = [True, True, True, False, False, True, True, True]  # forgot London hop and London fact
    result = score(forgot_capital, [], 4, kb)
    assert result["success_du"] == 1.0 and result["recall"] == 1.0 and result["best_minimal_set"] == [3, 4]
    assert result["acc_biographies"] is None and result["acc_all"] == result["acc_relationships"] == 1.0
    assert score(forgot_capital, [], 2, kb)["success_du"] == 0.0


def test_mquake_chain_composition_and_bad_input():
    kb = build_mquake_kb(MQUAKE_FIXTURE, composition="chain")
    # case 2 now composes through case 1's composed fact (id 2), so one minimal set needs it plus a hop
    assert kb.minimal_sets[4] == [frozenset({3, 4}), frozenset({0, 2, 4}), frozenset({1, 2, 4})]
    broken = [dict(MQUAKE_FIXTURE[0], single_hops=MQUAKE_FIXTURE[0]["single_hops"][:1])]
    with pytest.raises(ValueError, match="2 triples but 1 single_hops"):
        build_mquake_kb(broken)
    with pytest.raises(ValueError, match="lacks questions"):
        build_mquake_kb([{k: v for k, v in MQUAKE_FIXTURE[2].items() if k != "questions"}])


# ------------------------------------------------------------------------------------ safe unpickling


class _RunsCode:
    def __reduce__(self):
        import os

        return (os.getcwd, ())


def test_restricted_unpickler_refuses_code(tmp_path):
    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps([_RunsCode()], protocol=2))
    with pytest.raises(pickle.UnpicklingError, match=r"refused to load global (posix|nt)\.getcwd"):
        load_torch_file(path)
    path.write_bytes(pickle.dumps({frozenset({1, 2}), frozenset({3})}, protocol=2))
    assert load_torch_file(path) == {frozenset({1, 2}), frozenset({3})}


def test_question_items_and_answer_matching():
    from unlearn_tasks.deep_unlearning import answer_is_correct, evaluation_questions

    items = evaluation_questions(tiny_kb())
    assert [i["kind"] for i in items] == ["relationship"] * 4 + ["biography"] * 4
    assert items[1] == {"kind": "relationship", "index": 1, "question": "Who is Adam Gray to Carl Gray?",
                        "answer": "father", "aliases": []}
    assert answer_is_correct(" He is his Father.", "father")
    assert not answer_is_correct("his dad", "father")
    assert answer_is_correct("London, UK", "Londres", aliases=["london"])
    assert score([1, 0, 0, 1], [1, 1, 0, 1], np.int64(1), tiny_kb())["target"] == 1
