"""Waterfall's keyed vocabulary permutation and a batched, multi-core lookup of permuted positions.

The permutation for owner id ``mu`` and previous token ``prev`` is numpy's legacy
``RandomState([mu, prev]).permutation(N)``: MT19937 seeded by ``init_by_array`` with the length-2 key,
then the legacy Fisher-Yates shuffle of ``arange(N)``. Token ``t`` maps to watermark position ``perm[t]``.

Why the engine still builds whole permutations: the value at position ``t`` is final only after the shuffle
steps ``N-1 ... t``, and the step that draws ``t``'s partner sits behind every rejection-sampled draw of the
earlier steps, so every 32-bit MT output up to step ``t`` must be generated and compared anyway (token ids
of ordinary text are mostly small, so that is nearly the whole stream). numpy's own C loop is the fastest
exact way to do it from Python, and using it makes the positions bit-identical by construction. The speed
comes instead from building each (id, previous token) permutation once per batch, keeping only the few
positions needed from it, and spreading the permutations over all cores.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from .owners import check_owner_id

DEFAULT_VOCAB_SIZE = 128000
"""Base vocabulary of the Llama-3 tokenizers (ids 128000-128255 are special), as used by WaterDrum."""

_MAX_KEY = 2**32 - 1
_MIN_PERMS_PER_JOB = 24
_MIN_PERMS_FOR_POOL = 48
BACKENDS = ("auto", "numba", "numpy")


def check_vocab_size(vocab_size: int) -> int:
    """Validate a watermark vocabulary size N (an int >= 2)."""
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, (int, np.integer)):
        raise TypeError(f"vocab_size must be an int, got {vocab_size!r}")
    if vocab_size < 2 or vocab_size > _MAX_KEY:
        raise ValueError(f"vocab_size must be in [2, 2**32 - 1], got {vocab_size}")
    return int(vocab_size)


def _check_prev(prev: int) -> int:
    if not 0 <= int(prev) <= _MAX_KEY:
        raise ValueError(f"previous token id {prev} is outside [0, 2**32 - 1]")
    return int(prev)


def permutation(owner_id: int, prev: int, vocab_size: int = DEFAULT_VOCAB_SIZE) -> np.ndarray:
    """The keyed permutation ``perm`` (uint32, length N): token t -> watermark position ``perm[t]``."""
    owner = check_owner_id(owner_id)
    n = check_vocab_size(vocab_size)
    perm = np.random.RandomState([owner, _check_prev(prev)]).permutation(n)
    return perm.astype(np.uint32)


def _positions_of_groups(
    ids: Sequence[int], prevs: np.ndarray, offsets: np.ndarray, targets: np.ndarray, vocab_size: int,
    compiled: bool = False,
) -> np.ndarray:
    """Serial kernel: out[k, m] = perm(ids[k], prevs[g])[targets[m]] for offsets[g] <= m < offsets[g+1]."""
    if compiled:
        from . import kernel_cache

        return kernel_cache.positions(np.asarray(ids, dtype=np.int64), prevs, offsets, targets, vocab_size)
    out = np.empty((len(ids), len(targets)), dtype=np.uint32)
    rng = np.random.RandomState(0)  # re-seeding one generator is cheaper than building one per key
    for k, owner in enumerate(ids):
        row = out[k]
        for g in range(len(prevs)):
            lo, hi = offsets[g], offsets[g + 1]
            if lo == hi:
                continue
            rng.seed([owner, int(prevs[g])])
            row[lo:hi] = rng.permutation(vocab_size)[targets[lo:hi]]
    return out


def _job(args: tuple[tuple[int, ...], np.ndarray, np.ndarray, np.ndarray, int, bool]) -> np.ndarray:
    return _positions_of_groups(*args)


def default_workers() -> int:
    """Cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def _pool_context() -> multiprocessing.context.BaseContext:
    # fork starts workers in milliseconds and needs no __main__ guard in user scripts; the workers only
    # run numpy or the compiled kernel, so the usual fork-after-threads caveats (torch, tokenizers) do not bite.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def keyed_positions(
    ids: Sequence[int],
    prevs: np.ndarray,
    offsets: np.ndarray,
    targets: np.ndarray,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    workers: int | None = None,
    backend: str = "auto",
) -> np.ndarray:
    """Positions of many tokens under many keyed permutations, each permutation built once.

    ``targets`` is grouped by previous token: group g holds ``targets[offsets[g]:offsets[g+1]]``, all
    following token ``prevs[g]``. Returns uint32 ``out`` of shape ``[len(ids), len(targets)]`` with
    ``out[k, m] = permutation(ids[k], prevs[g], N)[targets[m]]``. ``workers`` processes share the
    ``len(ids) * len(prevs)`` permutations (default: all cores; 1 = in this process).
    ``backend``: ``"numba"`` (compiled kernel), ``"numpy"`` (``RandomState``) or ``"auto"`` (numba when
    installed); both give identical results and run in worker processes.
    """
    from . import kernel_cache

    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "numba" and not kernel_cache.available():
        raise RuntimeError("backend='numba' needs numba: pip install 'lm-eval-unlearning[waterdrum]'")
    n = check_vocab_size(vocab_size)
    owners = tuple(check_owner_id(v) for v in ids)
    prevs = np.asarray(prevs, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    if prevs.ndim != 1 or offsets.shape != (len(prevs) + 1,) or targets.ndim != 1:
        raise ValueError("need 1-d prevs, 1-d targets and offsets of length len(prevs) + 1")
    if offsets[0] != 0 or offsets[-1] != len(targets) or np.any(np.diff(offsets) < 0):
        raise ValueError("offsets must rise from 0 to len(targets)")
    if len(prevs) and (prevs.min() < 0 or prevs.max() > _MAX_KEY):
        raise ValueError("previous token ids must lie in [0, 2**32 - 1]")
    if len(targets) and (targets.min() < 0 or targets.max() >= n):
        raise ValueError(f"target token ids must lie in [0, {n})")
    workers = default_workers() if workers is None else int(workers)
    if workers < 1:
        raise ValueError("workers must be >= 1")
    compiled = backend != "numpy" and kernel_cache.available()
    total = len(owners) * len(prevs)
    if workers == 1 or total < (_MIN_PERMS_FOR_POOL * (4 if compiled else 1)) or not owners:
        return _positions_of_groups(owners, prevs, offsets, targets, n, compiled)
    # (kernel_cache.available() has loaded the compiled kernel in this process: forked workers inherit it)

    # Jobs: slices of previous-token groups (all ids each), several per worker for load balance.
    n_jobs = min(max(1, total // (_MIN_PERMS_PER_JOB * (4 if compiled else 1))), workers * 6)
    bounds = np.linspace(0, len(prevs), n_jobs + 1).round().astype(np.int64)
    jobs, starts = [], []
    for a, b in zip(bounds[:-1], bounds[1:]):
        if b > a:
            lo, hi = offsets[a], offsets[b]
            jobs.append((owners, prevs[a:b], offsets[a : b + 1] - lo, targets[lo:hi], n, compiled))
            starts.append(int(lo))
    out = np.empty((len(owners), len(targets)), dtype=np.uint32)
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=_pool_context()) as pool:
        for start, part in zip(starts, pool.map(_job, jobs)):
            out[:, start : start + part.shape[1]] = part
    return out
