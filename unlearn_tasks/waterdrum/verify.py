"""Waterfall verification (Fourier family, n-gram 2), batched over texts, owner ids and keys.

Score of a text for owner id ``mu`` and key ``k_p``: the mean over counted tokens of
``cos(2*pi*f*pos/N)`` (``sin`` for the upper keys), where ``pos = perm_{mu, prev}[t]`` for each bigram
(prev, t). The first token is never counted; counting stops at the first special token (id >= N); a text
with nothing to count scores 0. This equals Waterfall's Fourier coefficient of the position histogram.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .owners import parse_ids
from .permutation import DEFAULT_VOCAB_SIZE, check_vocab_size, keyed_positions

if TYPE_CHECKING:
    from .tokenizer import TextEncoder

_MAX_TOKEN = 2**32 - 1


def max_frequency(vocab_size: int) -> int:
    """Highest Fourier frequency used as a key: N/2 - 1 for even N, N//2 for odd N."""
    n = check_vocab_size(vocab_size)
    return n // 2 - 1 if n % 2 == 0 else n // 2


def perturbation_key(k_p: int, vocab_size: int = DEFAULT_VOCAB_SIZE) -> tuple[str, int]:
    """Map key ``k_p`` (1 .. 2*max_freq) to ``("cos", f)`` or ``("sin", f)`` with frequency f."""
    if isinstance(k_p, bool) or not isinstance(k_p, (int, np.integer)):
        raise TypeError(f"k_p must be an int, got {k_p!r}")
    top = max_frequency(vocab_size)
    if not 1 <= k_p <= 2 * top:
        raise ValueError(f"k_p must be in [1, {2 * top}] for vocab_size {vocab_size}, got {k_p}")
    return ("cos", int(k_p)) if k_p <= top else ("sin", int(k_p) - top)


def key_values(positions: np.ndarray, k_p: int, vocab_size: int = DEFAULT_VOCAB_SIZE) -> np.ndarray:
    """``cos(2*pi*f*pos/N)`` (or ``sin``) for watermark positions, in float64."""
    kind, freq = perturbation_key(k_p, vocab_size)
    # (f * pos) mod N keeps the angle exact in integers before the float conversion.
    phase = (np.asarray(positions, dtype=np.int64) * freq) % vocab_size
    angle = phase * (2.0 * np.pi / vocab_size)
    return np.cos(angle) if kind == "cos" else np.sin(angle)


def perturbation_function(k_p: int, vocab_size: int = DEFAULT_VOCAB_SIZE) -> np.ndarray:
    """Unit-amplitude perturbation phi over watermark positions 0..N-1 (multiply by kappa for logits)."""
    return key_values(np.arange(check_vocab_size(vocab_size)), k_p, vocab_size)


def _as_keys(k_p: int | Iterable[int], vocab_size: int) -> list[int]:
    keys = [k_p] if isinstance(k_p, (int, np.integer)) and not isinstance(k_p, bool) else list(k_p)  # type: ignore[arg-type]
    if not keys:
        raise ValueError("no k_p given")
    for key in keys:
        perturbation_key(key, vocab_size)
    return [int(k) for k in keys]


def counted_bigrams(
    token_seqs: Sequence[Sequence[int] | np.ndarray], vocab_size: int = DEFAULT_VOCAB_SIZE
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counted bigrams of every text, concatenated in text order.

    Returns ``(prev, token, lengths)``: int64 arrays of the previous and counted tokens, and the number
    L of counted tokens per text (the first token is skipped; counting stops at the first id >= N).
    """
    n = check_vocab_size(vocab_size)
    if isinstance(token_seqs, (str, bytes)):
        raise TypeError("token_seqs must be a sequence of token-id sequences, not a string")
    prevs, toks = [], []
    lengths = np.zeros(len(token_seqs), dtype=np.int64)
    for i, seq in enumerate(token_seqs):
        if isinstance(seq, (str, bytes)):
            raise TypeError(f"text {i}: expected token ids, got a string (use verify_texts for strings)")
        arr = np.asarray(seq)
        if arr.size == 0:
            continue
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"text {i}: token ids must be a 1-d sequence of integers")
        arr = arr.astype(np.int64)
        if arr.min() < 0 or arr.max() > _MAX_TOKEN:
            raise ValueError(f"text {i}: token ids must lie in [0, 2**32 - 1]")
        special = np.flatnonzero(arr[1:] >= n)
        stop = int(special[0]) if len(special) else len(arr) - 1
        if stop:
            prevs.append(arr[:stop])
            toks.append(arr[1 : stop + 1])
            lengths[i] = stop
    if not prevs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), lengths
    return np.concatenate(prevs), np.concatenate(toks), lengths


def verify_tokens(
    token_seqs: Sequence[Sequence[int] | np.ndarray],
    ids: int | str | Iterable[int],
    k_p: int | Iterable[int] = 1,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    workers: int | None = None,
    return_lengths: bool = False,
    backend: str = "auto",
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Watermark scores of tokenised texts: float64 array ``[texts, ids, keys]``.

    ``ids`` is an owner id, an id spec such as ``"0-19"``, or a list; ``k_p`` one key or a list.
    Every (id, previous token) permutation is built once for the whole batch, on ``workers`` cores
    (default all), so pass all texts in one call. With ``return_lengths`` also returns the counted-token
    count L per text (the weight for pooling generations). ``backend``: see :func:`keyed_positions`.
    """
    n = check_vocab_size(vocab_size)
    owners = parse_ids(ids)
    keys = _as_keys(k_p, n)
    prev, tok, lengths = counted_bigrams(token_seqs, n)
    scores = np.zeros((len(lengths), len(owners), len(keys)), dtype=np.float64)
    if len(tok):
        # Unique (prev, token) pairs grouped by prev; each bigram remembers its pair.
        order = np.lexsort((tok, prev))
        sp, st = prev[order], tok[order]
        first = np.ones(len(sp), dtype=bool)
        first[1:] = (sp[1:] != sp[:-1]) | (st[1:] != st[:-1])
        pair_of = np.empty(len(sp), dtype=np.int64)
        pair_of[order] = np.cumsum(first) - 1
        pair_prev, pair_tok = sp[first], st[first]
        new_prev = np.ones(len(pair_prev), dtype=bool)
        new_prev[1:] = pair_prev[1:] != pair_prev[:-1]
        starts = np.flatnonzero(new_prev)
        offsets = np.append(starts, len(pair_prev))
        positions = keyed_positions(owners, pair_prev[starts], offsets, pair_tok, n, workers, backend)
        text_of = np.repeat(np.arange(len(lengths)), lengths)
        for c, key in enumerate(keys):
            values = key_values(positions, key, n)  # [ids, pairs]
            for k in range(len(owners)):
                sums = np.bincount(text_of, weights=values[k][pair_of], minlength=len(lengths))
                scores[:, k, c] = sums / np.maximum(lengths, 1)
    return (scores, lengths) if return_lengths else scores


def verify_texts(
    texts: Sequence[str],
    ids: int | str | Iterable[int],
    k_p: int | Iterable[int] = 1,
    tokenizer: TextEncoder | Any | str | None = None,
    vocab_size: int | None = None,
    workers: int | None = None,
    return_lengths: bool = False,
    backend: str = "auto",
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Watermark scores of strings, ``[texts, ids, keys]``; see :func:`verify_tokens`.

    ``tokenizer``: None for the Llama-3 tokenizer (WaterDrum's), a name or local directory of a Hugging
    Face tokenizer, or a tokenizer object. ``vocab_size`` defaults to the tokenizer's base vocabulary.
    Texts are tokenised without special tokens added (no BOS).
    """
    from .tokenizer import as_encoder

    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    encoder = as_encoder(tokenizer)
    n = encoder.vocab_size if vocab_size is None else vocab_size
    token_seqs = [encoder.encode(str(t)) for t in texts]
    return verify_tokens(token_seqs, ids, k_p, n, workers, return_lengths, backend)
