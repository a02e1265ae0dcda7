"""ReLU scoring rules, prompts and option sampling against hand-computed values (no model, no lm-eval run)."""

import math

import numpy as np
import pytest

from unlearn_tasks.tofu_formats import aggregate, prompts, scoring
from unlearn_tasks.tofu_formats.documents import generation_budget
from unlearn_tasks.tofu_formats.sampling import OptionSampler, default_sample, parity_sample


def test_letter_accuracy_is_argmax_over_the_compared_letters():
    lls = [-2.0, -1.5, -0.3, -3.0]  # the model prefers C, then B
    assert scoring.letter_accuracy(lls, 2) == 1.0
    # Two options shown (A, B), gold B. Parity compares all four letters: C wins, so the item is wrong ...
    assert scoring.letter_accuracy(lls, 1) == 0.0
    # ... default compares the shown letters only: B wins.
    assert scoring.letter_accuracy(lls[:2], 1) == 1.0
    assert scoring.letter_accuracy([-1.0, -1.0], 0) == 1.0  # ties: the first letter, like numpy/torch argmax


def test_cloze_probability_is_the_geometric_mean_of_token_probabilities():
    assert scoring.cloze_probability([-0.5, -1.5]) == pytest.approx(math.exp(-1.0))  # 0.3679
    assert scoring.cloze_probability([math.log(0.5), math.log(0.125)]) == pytest.approx(0.25)  # sqrt(0.5 * 0.125)
    assert math.isnan(scoring.cloze_probability([]))


def test_comprehension_rouge_is_the_mean_of_rouge_1_2_l_f1():
    # pred 3 tokens, target 6: R1 P=1 R=1/2 F=2/3; R2 2 of 2 pred bigrams, 5 target bigrams: F=4/7; RL LCS 3: F=2/3
    assert scoring.rouge_f1_mean("the cat sat on the mat", "the cat sat") == pytest.approx(40 / 63)
    assert scoring.rouge_f1_mean("the cat sat", "the cat sat on the mat") == pytest.approx(40 / 63)  # symmetric
    assert scoring.rouge_f1_mean("born in Lisbon", "born in Lisbon") == pytest.approx(1.0)
    assert scoring.rouge_f1_mean("Lisbon", "Lisbon") == pytest.approx(2 / 3)  # one word: no bigram, ROUGE-2 F = 0
    # stemming: "writes" ~ "writing"; R1 F = 2/3 (2 of 3 tokens), R2 F = 1/2, RL F = 2/3
    expected = (2 / 3 + 1 / 2 + 2 / 3) / 3
    assert scoring.rouge_f1_mean("she writes poetry", "she writing novels") == pytest.approx(expected)


def test_analogy_qa_is_rouge_l_recall():
    assert scoring.analogy_recall("Lisbon", "He was born in Lisbon.") == pytest.approx(1.0)
    assert scoring.analogy_recall("science fiction", "fiction") == pytest.approx(0.5)


def test_pair_aggregation_forget_retain_and_gap():
    items = [("forget", 1.0), ("retain", 0.0), ("forget", 0.0), ("retain", 0.0), ("retain", 1.0)]
    assert aggregate.forget_mean(items) == pytest.approx(0.5)
    assert aggregate.retain_mean(items) == pytest.approx(1 / 3)
    assert aggregate.forget_retain_gap(items) == pytest.approx(0.5 - 1 / 3)
    assert math.isnan(aggregate.forget_retain_gap([("retain", 1.0)]))


class _BosTokenizer:
    """Word-level stand-in that adds a BOS token when asked for special tokens (like Llama's)."""

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": ([0] if add_special_tokens else []) + [1] * len(text.split())}


def test_comprehension_generation_budget_parity_counts_bos():
    assert generation_budget(_BosTokenizer(), "Hina Ameen writes geology.", "parity") == 5  # release: len(tok(label))
    assert generation_budget(_BosTokenizer(), "Hina Ameen writes geology.", "default") == 4


def test_prompts_are_the_release_strings():
    assert prompts.mcqa_prompt("Who?", ["x", "y"]) == "Question: Who? \nA. x\nB. y\nAnswer:"
    assert prompts.mcqa_prompt("Who?", ["x", "y", "z"], context="Bio.") == (
        "Context: Bio.\nQuestion: Who? \nA. x\nB. y\nC. z\nAnswer:")
    assert prompts.odd_one_out_prompt(["f1", "f2", "f3"]) == (
        "Question: Choose the option that provides a correct fact (choose the correct option from the below "
        "options):\nA. f1\nB. f2\nC. f3\nAnswer:")
    assert prompts.cloze_prompt("In which genre does Hina Ameen primarily write?",
                                "Hina Ameen primarily contributes to the [MASK]") == (
        "Question: In which genre does Hina Ameen primarily write?\nAnswer: Hina Ameen primarily contributes to the ")
    assert prompts.comprehension_qa_prompt("Bio.", "Who?") == "Context: Bio.\nQuestion: Who?\nAnswer:"


def _release_sampling(items, n):
    """The release's procedure as the reference notes transcribe it (global numpy RNG, seeded once)."""
    np.random.seed(seed=42)
    out = []
    for options, answer in items:
        correct_idx = options.index(answer)
        wrong = [i for i in range(n) if i != correct_idx]
        wrong = np.random.choice(wrong, n - 1, replace=False)
        opts = [options[correct_idx]] + [options[w] for w in wrong]
        np.random.shuffle(opts)
        out.append((opts, "ABCD"[opts.index(answer)]))
    return out


@pytest.mark.parametrize("n", [4, 3, 2])
def test_parity_sampling_reproduces_the_release_stream(n):
    items = [([f"o{i}{k}" for k in range(4)], f"o{i}{i % 4}") for i in range(40)]  # correct at A, B, C, D in turn
    sampler = OptionSampler("parity")
    ours = []
    for i, (options, answer) in enumerate(items):
        shown, gold = sampler.sample(options, options.index(answer), n, i)
        ours.append((shown, "ABCD"[gold]))
    assert ours == _release_sampling(items, n)


def test_parity_quirk_distractors_only_from_the_first_n_slots():
    options = ["a", "b", "c", "d"]
    rng = np.random.RandomState(42)
    for _ in range(20):  # correct at A, two options: the distractor is always B (slot < 2)
        shown, gold = parity_sample(options, "a", 2, rng)
        assert sorted(shown) == ["a", "b"] and shown[gold] == "a"
    for _ in range(20):  # correct at D (slot >= n): the distractors come from A, B, C
        shown, gold = parity_sample(options, "d", 3, rng)
        assert shown[gold] == "d" and len(set(shown)) == 3 and set(shown) <= {"a", "b", "c", "d"}
    for _ in range(20):  # correct at A, three options: D is never shown
        shown, gold = parity_sample(options, "a", 3, rng)
        assert sorted(shown) == ["a", "b", "c"] and shown[gold] == "a"


def test_default_sampling_uses_every_distractor_and_is_per_item():
    options = ["a", "b", "c", "d"]
    seen = set()
    for i in range(60):
        shown, gold = default_sample(options, 0, 2, np.random.default_rng([42, i]))
        assert len(shown) == 2 and shown[gold] == "a"
        seen |= set(shown) - {"a"}
    assert seen == {"b", "c", "d"}  # the parity quirk would only ever show "b"
    a, b = OptionSampler("default"), OptionSampler("default")
    b.sample(options, 1, 3, 0)  # consuming another item does not change item 5
    assert a.sample(options, 1, 3, 5) == b.sample(options, 1, 3, 5)
