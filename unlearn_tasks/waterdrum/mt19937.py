"""Optional compiled kernel (numba): the same keyed permutations, about 3-4x faster per core than numpy.

An own implementation, from the published MT19937 algorithm and numpy's documented legacy stream, of
exactly what ``RandomState([id, prev]).permutation(N)`` does: ``init_by_array`` seeding with the length-2
key, tempered 32-bit outputs, and the legacy Fisher-Yates shuffle whose step ``i`` (N-1 down to 1) draws
``j`` by masked rejection (smallest all-ones mask >= i, redraw while ``x & mask > i``) and swaps i and j.
The kernel stops after the step of the smallest needed token (later steps never move it) and reads the
needed positions straight from the shuffled array. It is single-threaded on purpose (no numba threading
layer, whose OpenMP threads fight torch's); :mod:`.permutation` spreads it over processes.
Parity with numpy is tested; :mod:`.permutation` falls back to numpy when numba is missing.
Importing this module imports numba; :mod:`.kernel_cache` runs the kernel without it (from its machine code
cached on disk by :func:`compile_object`).
"""

from __future__ import annotations

import numpy as np

try:
    import numba
    from numba import carray, cfunc, njit, types
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

    def _positions(n_ids, ids_p, n_groups, prevs_p, offsets_p, n_targets, targets_p, n, out_p, mt_p, buf_p, arr_p):
        # A C-callable entry point: every array comes from the caller (numpy), so the machine code needs neither
        # numba's runtime nor its allocator and can be loaded without numba (see :mod:`.kernel_cache`).
        ids = carray(ids_p, (n_ids,))
        prevs = carray(prevs_p, (n_groups,))
        offsets = carray(offsets_p, (n_groups + 1,))
        targets = carray(targets_p, (n_targets,))
        out = carray(out_p, (n_ids, n_targets))
        mt = carray(mt_p, (_N_STATE,))
        buf = carray(buf_p, (_N_STATE,))
        arr = carray(arr_p, (n,))
        for k in range(n_ids):
            for g in range(n_groups):
                lo = offsets[g]
                hi = offsets[g + 1]
                if hi > lo:
                    _one(ids[k], prevs[g], n, lo, hi, targets, out[k], mt, buf, arr)


def compile_object() -> tuple[bytes, str, list[str]]:
    """Machine code of the kernel's C entry point for this CPU: ``(object file, symbol, external symbols)``.

    The entry point is ``void f(int64 n_ids, int64 *ids, int64 n_groups, int64 *prevs, int64 *offsets,
    int64 n_targets, int64 *targets, int64 n, uint32 *out[n_ids, n_targets], uint64 *mt[624], int64 *buf[624],
    uint32 *arr[n])``. The external symbols are those of numba's error path around the call, which the kernel
    never takes (it raises nothing)."""
    if not AVAILABLE:
        raise RuntimeError("numba is not installed")
    p64 = types.CPointer(types.int64)
    entry = cfunc(types.void(types.int64, p64, types.int64, p64, p64, types.int64, p64, types.int64,
                             types.CPointer(types.uint32), types.CPointer(types.uint64), p64,
                             types.CPointer(types.uint32)))(_positions)
    library = entry._library
    module = library._final_module
    externals = sorted(f.name for f in module.functions if f.is_declaration and not f.name.startswith("llvm."))
    externals += sorted(g.name for g in module.global_variables if g.is_declaration)
    return library._codegen._tm.emit_object(module), entry.native_name, externals
