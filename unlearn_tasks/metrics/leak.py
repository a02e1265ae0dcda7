"""Leak@k (arXiv 2511.04934): the chance that at least one of k answers sampled for a question leaks the forgotten
answer, estimated without bias from n >= k samples of which c leak, as pass@k is: ``1 - C(n-c, k) / C(n, k)``
(the probability that k of the n samples drawn without replacement are all clean, subtracted from 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: The k the Leak-k release reports (its ``TOFU/eval/whole_eval.py``, ``K_VALUES``).
RELEASE_K = (1, 2, 4, 8, 16, 32, 64, 128)


def release_rows(label: str) -> tuple[tuple[str, str], ...]:
    """A Leak@k benchmark's ``unlearn report`` rows: ``leak_at_K`` for the release's K, labelled ``label`` + K."""
    return tuple((f"leak_at_{k}", f"{label}{k}") for k in RELEASE_K)


def leak_at_k(n: int, c: int, k: int) -> float:
    """Leak@k of one question from ``n`` samples, ``c`` of them leaking. Exact: Python's integers hold the binomial
    coefficients and their quotient is correctly rounded, so large ``n`` loses nothing."""
    if not (isinstance(n, int) and isinstance(c, int) and isinstance(k, int)):
        raise TypeError(f"leak_at_k takes whole numbers, got n={n!r}, c={c!r}, k={k!r}")
    if not 1 <= k <= n or not 0 <= c <= n:
        raise ValueError(f"leak_at_k needs 1 <= k <= n and 0 <= c <= n, got n={n}, c={c}, k={k}")
    if n - c < k:  # every draw of k samples holds a leak
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_leak_at_k(counts: Sequence[int], n: int, k: int) -> float:
    """Leak@k of a question set: the mean over questions of :func:`leak_at_k`, ``counts`` holding each question's
    number of leaking samples out of ``n``; NaN for no questions."""
    if not counts:
        return float("nan")
    return sum(leak_at_k(n, c, k) for c in counts) / len(counts)
