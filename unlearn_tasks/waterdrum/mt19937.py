"""Optional compiled kernel (numba): the same keyed permutations, about 3-4x faster per core than numpy.

An own implementation, from the published MT19937 algorithm and numpy's documented legacy stream, of
exactly what ``RandomState([id, prev]).permutation(N)`` does: ``init_by_array`` seeding with the length-2
key, tempered 32-bit outputs, and the legacy Fisher-Yates shuffle whose step ``i`` (N-1 down to 1) draws
``j`` by masked rejection (smallest all-ones mask >= i, redraw while ``x & mask > i``) and swaps i and j.
The kernel stops after the step of the smallest needed token (later steps never move it) and reads the
needed positions straight from the shuffled array. It is single-threaded on purpose (no numba threading
layer, whose OpenMP threads fight torch's); :mod:`.permutation` spreads it over processes.
Parity with numpy is tested; :mod:`.permutation` falls back to numpy when numba is missing.
"""

from __future__ import annotations

import numpy as np

try:
    import numba
    from numba import njit
except ImportError:  # pragma: no cover - exercised where numba is absent
    numba = None

AVAILABLE = numba is not None

_N_STATE = 624
_M = 397
_MATRIX_A = 0x9908B0DF
_UPPER = 0x80000000
_LOWER = 0x7FFFFFFF
_MASK32 = 0xFFFFFFFF

if AVAILABLE:

    @njit(cache=True, inline="always")
    def _seed_by_array(mt: np.ndarray, key0: np.uint64, key1: np.uint64) -> None:
        mt[0] = 19650218
        for i in range(1, _N_STATE):
            mt[i] = (1812433253 * (mt[i - 1] ^ (mt[i - 1] >> 30)) + i) & _MASK32
        i = 1
        j = 0
        for _ in range(_N_STATE):  # max(624, key length 2)
            key = key0 if j == 0 else key1
            mt[i] = ((mt[i] ^ (((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1664525) & _MASK32)) + key + j) & _MASK32
            i += 1
            j += 1
            if i >= _N_STATE:
                mt[0] = mt[_N_STATE - 1]
                i = 1
            if j >= 2:
                j = 0
        for _ in range(_N_STATE - 1):
            mt[i] = ((mt[i] ^ (((mt[i - 1] ^ (mt[i - 1] >> 30)) * 1566083941) & _MASK32)) - i) & _MASK32
            i += 1
            if i >= _N_STATE:
                mt[0] = mt[_N_STATE - 1]
                i = 1
        mt[0] = _UPPER

    @njit(cache=True, inline="always")
    def _twist(mt: np.ndarray) -> None:
        for k in range(_N_STATE - _M):
            y = (mt[k] & _UPPER) | (mt[k + 1] & _LOWER)
            mt[k] = mt[k + _M] ^ (y >> 1) ^ ((y & 1) * _MATRIX_A)
        for k in range(_N_STATE - _M, _N_STATE - 1):
            y = (mt[k] & _UPPER) | (mt[k + 1] & _LOWER)
            mt[k] = mt[k + _M - _N_STATE] ^ (y >> 1) ^ ((y & 1) * _MATRIX_A)
        y = (mt[_N_STATE - 1] & _UPPER) | (mt[0] & _LOWER)
        mt[_N_STATE - 1] = mt[_M - 1] ^ (y >> 1) ^ ((y & 1) * _MATRIX_A)

    @njit(cache=True)
    def _one(owner: int, prev: int, n: int, lo: int, hi: int, targets: np.ndarray, out_row: np.ndarray,
             mt: np.ndarray, buf: np.ndarray, arr: np.ndarray) -> None:
        _seed_by_array(mt, np.uint64(owner), np.uint64(prev))
        for t in range(n):
            arr[t] = t
        last = n
        for m in range(lo, hi):
            last = min(last, targets[m])
        last = max(last, 1)  # positions >= last are final once step `last` is done
        mask = np.int64(n - 1)
        for s in (1, 2, 4, 8, 16):
            mask |= mask >> s
        i = np.int64(n - 1)
        while i >= last:
            # One MT19937 block of 624 tempered outputs, then the shuffle steps it feeds. The steps are
            # branch-free: a rejected draw swaps arr[i] with itself and leaves i (and the mask) as they are.
            _twist(mt)
            for k in range(_N_STATE):
                y = mt[k]
                y ^= y >> 11
                y ^= (y << 7) & 0x9D2C5680
                y ^= (y << 15) & 0xEFC60000
                y ^= y >> 18
                buf[k] = y
            for k in range(_N_STATE):
                j = np.int64(buf[k]) & mask
                ok = j <= i
                jj = j if ok else i
                tmp = arr[i]
                arr[i] = arr[jj]
                arr[jj] = tmp
                i -= ok
                mask >>= (mask >> 1) >= i  # smallest all-ones mask >= i
                if i < last:
                    break
        for m in range(lo, hi):
            out_row[m] = arr[targets[m]]

    @njit(cache=True)
    def _positions(ids: np.ndarray, prevs: np.ndarray, offsets: np.ndarray, targets: np.ndarray, n: int) -> np.ndarray:
        n_groups = len(prevs)
        out = np.empty((len(ids), len(targets)), dtype=np.uint32)
        mt = np.empty(_N_STATE, dtype=np.uint64)
        buf = np.empty(_N_STATE, dtype=np.int64)
        arr = np.empty(n, dtype=np.uint32)
        for k in range(len(ids)):
            for g in range(n_groups):
                lo = offsets[g]
                hi = offsets[g + 1]
                if hi > lo:
                    _one(ids[k], prevs[g], n, lo, hi, targets, out[k], mt, buf, arr)
        return out


def positions(ids: np.ndarray, prevs: np.ndarray, offsets: np.ndarray, targets: np.ndarray, vocab_size: int) -> np.ndarray:
    """Compiled, single-threaded equivalent of :func:`.permutation.keyed_positions` (inputs validated)."""
    if not AVAILABLE:
        raise RuntimeError("numba is not installed")
    return _positions(
        np.ascontiguousarray(ids, dtype=np.int64),
        np.ascontiguousarray(prevs, dtype=np.int64),
        np.ascontiguousarray(offsets, dtype=np.int64),
        np.ascontiguousarray(targets, dtype=np.int64),
        int(vocab_size),
    )
