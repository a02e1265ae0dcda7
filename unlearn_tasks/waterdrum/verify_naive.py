"""Naive per-text Waterfall verification, straightforward and slow: the yardstick that parity tests and benchmarks hold
the batched :mod:`.verify` against.

Per text and id: build ``RandomState([id, prev]).permutation(N)`` for each bigram (an LRU cache keeps
recent ones), histogram the watermark positions, and read the key's coefficient off the real FFT exactly
as Waterfall does (real parts for frequencies 1..max_freq, then minus the imaginary parts), or, with
``method="sum"``, average cos/sin directly.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence

import numpy as np

from .permutation import DEFAULT_VOCAB_SIZE
from .verify import key_values, max_frequency


class NaiveVerifier:
    """Naive verifier with an LRU cache of ``cache_size`` permutations."""

    def __init__(self, vocab_size: int = DEFAULT_VOCAB_SIZE, cache_size: int = 512) -> None:
        self.vocab_size = int(vocab_size)
        self.cache_size = int(cache_size)
        self._cache: OrderedDict[tuple[int, int], np.ndarray] = OrderedDict()
        self.built = 0  # permutations computed (cache misses)

    def permutation(self, owner_id: int, prev: int) -> np.ndarray:
        key = (int(owner_id), int(prev))
        perm = self._cache.get(key)
        if perm is None:
            perm = np.random.RandomState(list(key)).permutation(self.vocab_size).astype(np.uint32)
            self.built += 1
            self._cache[key] = perm
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return perm

    def positions(self, tokens: Sequence[int], owner_id: int) -> list[int]:
        """Watermark positions of the counted tokens of one text."""
        out = []
        for j in range(1, len(tokens)):
            if tokens[j] >= self.vocab_size:
                break
            out.append(int(self.permutation(owner_id, tokens[j - 1])[tokens[j]]))
        return out

    def score(self, tokens: Sequence[int], owner_id: int, k_p: int = 1, method: str = "fft") -> float:
        """Score of one text for one id and key."""
        pos = self.positions([int(t) for t in tokens], owner_id)
        if not pos:
            return 0.0
        if method == "sum":
            return float(np.mean(key_values(np.array(pos), k_p, self.vocab_size)))
        if method != "fft":
            raise ValueError("method must be 'fft' or 'sum'")
        hist = np.bincount(pos, minlength=self.vocab_size) / len(pos)
        spec = np.fft.rfft(hist)
        top = max_frequency(self.vocab_size)
        coefficients = np.concatenate([spec.real[1 : top + 1], -spec.imag[1 : top + 1]])
        return float(coefficients[k_p - 1])

    def verify(
        self, token_seqs: Sequence[Sequence[int]], ids: Iterable[int], k_p: Iterable[int] = (1,), method: str = "fft"
    ) -> np.ndarray:
        """Scores ``[texts, ids, keys]``, text by text."""
        ids, keys = list(ids), list(k_p)
        out = np.zeros((len(token_seqs), len(ids), len(keys)))
        for i, tokens in enumerate(token_seqs):
            for k, owner in enumerate(ids):
                for c, key in enumerate(keys):
                    out[i, k, c] = self.score(tokens, owner, key, method)
        return out
