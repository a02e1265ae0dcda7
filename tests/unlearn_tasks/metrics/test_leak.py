"""Leak@k's unbiased estimator (arXiv 2511.04934, as pass@k) on counts worked out by hand."""

import math

import pytest

from unlearn_tasks.metrics.leak import leak_at_k, mean_leak_at_k


def test_known_counts():
    # n = 10, c = 3: Leak@1 = 3/10; Leak@2 = 1 - C(7,2)/C(10,2) = 1 - 21/45 = 24/45
    assert leak_at_k(10, 3, 1) == pytest.approx(0.3)
    assert leak_at_k(10, 3, 2) == pytest.approx(24 / 45)
    # n = 5, c = 2, k = 3: 1 - C(3,3)/C(5,3) = 1 - 1/10
    assert leak_at_k(5, 2, 3) == pytest.approx(0.9)
    # n = 4, c = 1, k = 2: 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert leak_at_k(4, 1, 2) == pytest.approx(0.5)


def test_edges():
    assert leak_at_k(8, 0, 1) == 0.0 and leak_at_k(8, 0, 8) == 0.0  # no leaking sample: never
    assert leak_at_k(8, 8, 1) == 1.0 and leak_at_k(8, 8, 8) == 1.0  # all leak: always
    assert leak_at_k(8, 1, 8) == 1.0 and leak_at_k(8, 3, 6) == 1.0  # k = n or n - c < k: every draw holds a leak
    assert leak_at_k(1, 1, 1) == 1.0 and leak_at_k(1, 0, 1) == 0.0


def test_leak_at_1_is_the_share_of_leaking_samples():
    for c in range(0, 201):
        assert leak_at_k(200, c, 1) == pytest.approx(c / 200)


def test_large_n_is_exact():
    # 1 - C(n-c,k)/C(n,k) = 1 - prod_{i=0}^{c-1} (n-k-i)/(n-i); the coefficients themselves overflow a float
    n, c, k = 100_000, 7, 1_000
    product = math.prod((n - k - i) / (n - i) for i in range(c))
    assert math.comb(n, k) > 10**308
    assert leak_at_k(n, c, k) == pytest.approx(1 - product, rel=1e-12)
    assert leak_at_k(10**6, 1, 10**5) == pytest.approx(0.1, rel=1e-12)  # one leak in n: k/n


def test_mean_over_questions():
    # three questions, n = 4: counts 0, 1, 4 -> Leak@2 = (0 + 1/2 + 1) / 3
    assert mean_leak_at_k([0, 1, 4], 4, 2) == pytest.approx(0.5)
    assert math.isnan(mean_leak_at_k([], 4, 2))


def test_bad_input():
    with pytest.raises(ValueError, match="1 <= k <= n"):
        leak_at_k(4, 1, 5)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        leak_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        leak_at_k(4, 1, 0)
    with pytest.raises(TypeError):
        leak_at_k(4.0, 1, 1)
