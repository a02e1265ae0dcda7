"""Which options an item shows, and in what order, when it is asked with 2, 3 or 4 options.

``parity`` reproduces the ReLU release: one numpy ``RandomState(42)`` stream per split, consumed item by item;
the distractors are drawn only from the first ``n`` option slots (A..D); options are shuffled.
``default`` draws the distractors from all wrong options and seeds each item on its own (seed 42 and the item's
index), so filtering or reordering items does not change any other item's options.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SEED = 42
LETTERS = "ABCD"


class OptionSampler:
    """Shuffles and sub-samples the options of the items of one split, in item order."""

    def __init__(self, mode: str, seed: int = SEED) -> None:
        self.mode = mode
        self.seed = seed
        self._stream = np.random.RandomState(seed)  # the release's np.random.seed(42) global stream

    def sample(self, options: Sequence[str], correct: int, n: int, index: int) -> tuple[list[str], int]:
        """(shown options, index of the correct one among them) for item ``index`` of the split."""
        if self.mode == "parity":
            return parity_sample(options, options[correct], n, self._stream)
        return default_sample(options, correct, n, np.random.default_rng([self.seed, index]))


def parity_sample(options: Sequence[str], answer: str, n: int, rng: np.random.RandomState) -> tuple[list[str], int]:
    """The release's procedure: the correct option is found by its text, distractors come from slots ``< n``."""
    correct_idx = list(options).index(answer)
    pool = [i for i in range(n) if i != correct_idx]
    wrong = rng.choice(pool, n - 1, replace=False)
    shown = [options[correct_idx]] + [options[i] for i in wrong]
    rng.shuffle(shown)
    return shown, shown.index(answer)


def default_sample(options: Sequence[str], correct: int, n: int, rng: np.random.Generator) -> tuple[list[str], int]:
    """Distractors drawn from every wrong option; the correct option is tracked by position, not text."""
    pool = [i for i in range(len(options)) if i != correct]
    order = [correct, *(int(i) for i in rng.choice(pool, n - 1, replace=False))]
    rng.shuffle(order)
    return [options[i] for i in order], order.index(correct)
