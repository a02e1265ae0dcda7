"""TOFU Leak@k's declaration: its tasks, its report rows (the release's k) and the direction of its metrics."""

from unlearn_tasks.benchmarks import Benchmark
from unlearn_tasks.metrics.leak import RELEASE_K

BENCHMARK = Benchmark(
    name="tofu_leak",
    tasks=("tofu_forget01_leak", "tofu_forget05_leak", "tofu_forget10_leak"),
    rows=tuple((f"leak_at_{k}", f"Forget Leak@{k}") for k in RELEASE_K),
    lower_is_better=frozenset(f"leak_at_{k}" for k in RELEASE_K),
)
