"""Leak@k equals the Leak-k release's on the same samples with the same NLI classifier (issue 47, item 4): the
release's own functions, imported from its checkout, and this package's criterion and estimator, on two questions'
n = 200 samples (``benchmarks/bench_leak_release.py``). Skipped when the release's checkout is not on this machine."""

from pathlib import Path

import pytest

from fixtures.scripts import load_script

pytestmark = pytest.mark.slow  # 400 samples through both NLI paths: 3 to 9 minutes on a loaded 2-core machine

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_leak_release.py"


@pytest.fixture(scope="module")
def bench():
    module = load_script(SCRIPT)
    if not (module.RELEASE_GIT / "HEAD").is_file():
        pytest.skip(f"the Leak-k release's checkout is not at {module.RELEASE_GIT}")
    return module


def test_leak_at_k_equals_the_releases_per_k(bench):
    out = bench.compare(bench.RELEASE_GIT, n_questions=2, seed=1)
    assert out["commit"] == "a1c3db802f24d4ec0216d4f8e37b07466a256038"
    assert list(out["release"]) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert out["counts"] == out["release_counts"]
    assert all(0 < c < bench.N for c in out["counts"])  # the NLI model both entails and does not: a real test
    assert out["ours"] == out["release"]  # exactly, per k
    assert out["ours"][1] == pytest.approx(sum(out["counts"]) / (2 * bench.N))  # Leak@1: the share that leaks
