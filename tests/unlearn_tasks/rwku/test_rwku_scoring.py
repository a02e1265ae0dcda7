"""RWKU's ROUGE-L recall against hand-computed values: the release's ``rouge`` package behaviour (case- and
punctuation-sensitive, unstemmed, sentence split at ".", word sets, its LCS trace-back) and the rouge-score mode."""

import math
import random

import pytest

from unlearn_tasks.rwku.prompts import EMPTY_ANSWER, prediction
from unlearn_tasks.rwku.scoring import release_rouge_l_recall, rouge_l


@pytest.mark.parametrize(("reference", "answer", "expected"), [
    ("Harrowgate", "Harrowgate", 1.0),
    ("Harrowgate", "harrowgate", 0.0),  # case-sensitive
    ("Portland, Maine", "Portland Maine", 0.5),  # "Portland," is not "Portland"
    ("The Glass Orchard", "the Glass Orchard novel", 2 / 3),  # unstemmed, case-sensitive: "the" != "The"
    ("He was born in Harrowgate.", "Harrowgate. He was born there", 4 / 5),  # union over the answer's sentences
    ("b a a", "a b a", 1 / 2),  # the traced-back LCS is "a a": one distinct word of {a, b}
    ("a a b", "a b a", 1.0),  # here it is "a b"
    ("x. ", "x", 1 / 2),  # the piece " " after the dot becomes the empty word "", counted in the reference's set
    ("Harrowgate", EMPTY_ANSWER, 0.0),
])
def test_release_rouge_l_recall_by_hand(reference, answer, expected):
    assert release_rouge_l_recall(reference, answer) == pytest.approx(expected)
    assert rouge_l(reference, answer) == pytest.approx(expected)  # "release" is the default mode


def test_an_answer_without_sentences_is_nan_where_the_package_raises():
    assert math.isnan(release_rouge_l_recall("Harrowgate", "..."))


def test_rouge_score_mode_lowercases_and_drops_punctuation():
    assert rouge_l("Portland, Maine", "portland maine", mode="rouge_score") == 1.0
    assert rouge_l("Stephen King", "stephen kings", mode="rouge_score") == 0.5  # unstemmed


def test_prediction_strips_and_fills_the_empty_answer():
    assert prediction("  Harrowgate \n and more") == "Harrowgate \n and more"
    assert prediction(" \n ") == EMPTY_ANSWER
    assert prediction(" Harrowgate\nsecond line", first_line=True) == "Harrowgate"
    assert prediction("\nHarrowgate", first_line=True) == EMPTY_ANSWER


def test_same_as_the_rouge_package_when_installed():
    rouge = pytest.importorskip("rouge")  # the release's scorer (pip install rouge); an independent check
    scorer, rng = rouge.Rouge(), random.Random(0)
    vocab = ["a", "b", "c", "A", "b,", ".", "x."]
    for _ in range(500):
        ref = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 8)))
        hyp = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 8)))
        try:
            expected = scorer.get_scores(hyp, ref)[0]["rouge-l"]["r"]
        except ValueError:
            expected = math.nan
        got = release_rouge_l_recall(ref, hyp)
        assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected), (ref, hyp)
