"""WaterDrum verification: parity with the naive numpy reference, counting rules, ids, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from unlearn_tasks.waterdrum import mt19937
from unlearn_tasks.waterdrum.owners import format_ids, parse_ids
from unlearn_tasks.waterdrum.permutation import keyed_positions, permutation
from unlearn_tasks.waterdrum.verify import (
    counted_bigrams,
    max_frequency,
    perturbation_key,
    verify_texts,
    verify_tokens,
)
from unlearn_tasks.waterdrum.verify_naive import NaiveVerifier


def _random_texts(rng: np.random.Generator, n_texts: int, vocab: int, special_every: int = 0) -> list[np.ndarray]:
    texts = []
    for i in range(n_texts):
        length = int(rng.integers(0, 80))
        # Zipf-like ids so that (prev, token) pairs repeat within and across texts.
        toks = np.minimum(rng.zipf(1.3, size=length) - 1, vocab - 1)
        if special_every and i % special_every == 0 and length > 4:
            toks[length // 2] = vocab + int(rng.integers(0, 5))
        texts.append(toks)
    return texts


BACKENDS = ["numpy", pytest.param("numba", marks=pytest.mark.skipif(not mt19937.AVAILABLE, reason="numba absent"))]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("vocab", [1000, 1001, 128000])
def test_parity_with_numpy_reference(vocab: int, backend: str) -> None:
    rng = np.random.default_rng(vocab)
    texts = _random_texts(rng, 12 if vocab == 128000 else 40, vocab, special_every=5)
    ids = [0, 1, 19, 2**32 - 1]
    top = max_frequency(vocab)
    keys = [1, 2, top, top + 1, 2 * top]
    fast = verify_tokens(texts, ids, keys, vocab, workers=2, backend=backend)
    ref = NaiveVerifier(vocab).verify(texts, ids, keys, method="fft")
    assert fast.shape == (len(texts), len(ids), len(keys))
    np.testing.assert_allclose(fast, ref, atol=1e-6, rtol=0)
    np.testing.assert_array_equal(fast, verify_tokens(texts, ids, keys, vocab, workers=1, backend=backend))


@pytest.mark.skipif(not mt19937.AVAILABLE, reason="numba absent")
@pytest.mark.parametrize("vocab", [2, 3, 1000, 65537, 128000])
def test_compiled_kernel_gives_numpys_whole_permutation(vocab: int) -> None:
    for owner, prev in [(0, 0), (7, vocab - 1), (2**32 - 1, 2**32 - 1), (123456, 98765)]:
        got = keyed_positions([owner], [prev], [0, vocab], np.arange(vocab), vocab, workers=1, backend="numba")
        expected = np.random.RandomState([owner, prev]).permutation(vocab)
        np.testing.assert_array_equal(got[0], expected)
    # early stop: only the tail of the shuffle is needed for large token ids
    tail = np.arange(vocab - 3, vocab) if vocab > 3 else np.arange(vocab)
    got = keyed_positions([4], [9], [0, len(tail)], tail, vocab, workers=2, backend="numba")
    np.testing.assert_array_equal(got[0], permutation(4, 9, vocab)[tail])


def test_pinned_permutation_values() -> None:
    assert permutation(0, 0)[:4].tolist() == [91508, 56237, 70991, 18290]
    assert permutation(1, 9906)[[1917, 11, 0]].tolist() == [90342, 50437, 73594]
    assert permutation(5, 3, 10).tolist() == [3, 9, 8, 0, 5, 7, 1, 4, 2, 6]
    perm = permutation(3, 17, 5000)
    assert perm.dtype == np.uint32 and np.array_equal(np.sort(perm), np.arange(5000))
    assert not np.array_equal(perm, permutation(4, 17, 5000))


def test_keyed_positions_groups() -> None:
    prevs = np.array([5, 9])
    targets = np.array([1, 2, 7, 0])
    out = keyed_positions([2, 3], prevs, [0, 3, 4], targets, 50, workers=1)
    for k, owner in enumerate([2, 3]):
        expected = np.r_[permutation(owner, 5, 50)[[1, 2, 7]], permutation(owner, 9, 50)[[0]]]
        assert out[k].tolist() == expected.tolist()
    with pytest.raises(ValueError):
        keyed_positions([0], prevs, [0, 3, 5], targets, 50)
    with pytest.raises(ValueError):
        keyed_positions([0], prevs, [0, 3, 4], np.array([1, 2, 50, 0]), 50)
    with pytest.raises(ValueError):
        keyed_positions([0], prevs, [0, 3, 4], targets, 50, backend="cuda")


def test_stops_at_first_special_token() -> None:
    n = 1000
    base = [3, 10, 20, 30]
    with_special = base + [n + 1, 40, 50]
    s1 = verify_tokens([base], 4, 1, n)
    s2 = verify_tokens([with_special], 4, 1, n)
    assert s1[0, 0, 0] == s2[0, 0, 0]
    _, _, lengths = counted_bigrams([with_special, [n + 5, 7, 8]], n)
    # the first token is never counted, even when special
    assert lengths.tolist() == [3, 2]


def test_nothing_to_count_scores_zero() -> None:
    scores, lengths = verify_tokens([[], [5], [5, 1000], np.array([], dtype=np.int64)], [0, 1], [1, 3], 1000,
                                    return_lengths=True)
    assert np.all(scores == 0) and lengths.tolist() == [0, 0, 0, 0]
    assert verify_tokens([], [0], 1, 1000).shape == (0, 1, 1)


def test_key_mapping() -> None:
    assert perturbation_key(1, 128000) == ("cos", 1)
    assert perturbation_key(63999, 128000) == ("cos", 63999)
    assert perturbation_key(64000, 128000) == ("sin", 1)
    assert perturbation_key(127998, 128000) == ("sin", 63999)
    assert max_frequency(1001) == 500
    for bad in (0, 127999, -1):
        with pytest.raises(ValueError):
            perturbation_key(bad, 128000)
    with pytest.raises(TypeError):
        perturbation_key(1.0, 128000)  # type: ignore[arg-type]


def test_bad_inputs() -> None:
    with pytest.raises(TypeError):
        verify_tokens(["hello"], 0, 1, 1000)
    with pytest.raises(TypeError):
        verify_tokens([[1.5, 2.0]], 0, 1, 1000)
    with pytest.raises(ValueError):
        verify_tokens([[1, -2]], 0, 1, 1000)
    with pytest.raises(ValueError):
        verify_tokens([[1, 2]], -1, 1, 1000)
    with pytest.raises(ValueError):
        verify_tokens([[1, 2]], 2**32, 1, 1000)
    with pytest.raises(ValueError):
        verify_tokens([[1, 2]], 0, 1, 1)
    with pytest.raises(ValueError):
        verify_tokens([[1, 2]], [], 1, 1000)
    with pytest.raises(TypeError):
        verify_texts("just one string", 0, tokenizer=_CharEncoder())


class _CharEncoder:
    """A toy tokenizer: byte values, base vocabulary 256, '#' is 'special' (id 300)."""

    name = "bytes"
    vocab_size = 256

    def encode(self, text: str) -> list[int]:
        return [300 if ch == "#" else b for ch in text for b in ch.encode()]

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if i < 256).decode()


def test_verify_texts_with_injected_tokenizer() -> None:
    enc = _CharEncoder()
    texts = ["hello world", "hello world#more", "", "x"]
    scores, lengths = verify_texts(texts, "0-2", tokenizer=enc, return_lengths=True)
    assert scores.shape == (4, 3, 1)
    assert lengths.tolist() == [10, 10, 0, 0]
    np.testing.assert_array_equal(scores[0], scores[1])
    np.testing.assert_allclose(scores[:1], verify_tokens([enc.encode(texts[0])], [0, 1, 2], 1, 256))


def test_parse_ids() -> None:
    assert parse_ids("0-3,7, 9-10") == [0, 1, 2, 3, 7, 9, 10]
    assert parse_ids("5") == [5] and parse_ids(4) == [4] and parse_ids([3, 1, 3]) == [3, 1]
    assert parse_ids("4294967295") == [2**32 - 1]
    assert format_ids([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    for bad in ("", "1-", "a", "3-1", "1,,2", "-1", "4294967296", "0-2000000"):
        with pytest.raises(ValueError):
            parse_ids(bad)
    with pytest.raises(TypeError):
        parse_ids([1.5])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        parse_ids([])
