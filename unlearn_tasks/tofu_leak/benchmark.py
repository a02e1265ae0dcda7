"""TOFU Leak@k's declaration: its tasks, its report rows (the release's k) and the direction of its metrics."""

from unlearn_tasks.benchmarks import Benchmark
from unlearn_tasks.metrics.leak import release_rows

BENCHMARK = Benchmark(
    name="tofu_leak",
    tasks=("tofu_forget01_leak", "tofu_forget05_leak", "tofu_forget10_leak"),
    rows=release_rows("Forget Leak@"),
    lower_is_better=frozenset(metric for metric, _ in release_rows("")),
)
