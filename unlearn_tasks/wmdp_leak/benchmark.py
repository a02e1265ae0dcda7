"""WMDP Leak@k's declaration: its tasks, its report rows (the Leak-k release's k) and the direction of its metrics."""

from unlearn_tasks.benchmarks import Benchmark
from unlearn_tasks.metrics.leak import release_rows

BENCHMARK = Benchmark(
    name="wmdp_leak",
    tasks=("wmdp_bio_leak", "wmdp_chem_leak", "wmdp_cyber_leak"),
    rows=release_rows("Leak@"),
    lower_is_better=frozenset(metric for metric, _ in release_rows("")),
    # lm-eval's accuracy on the same questions (the option of highest log-likelihood)
    beside=tuple((f"wmdp_{s}_leak", f"wmdp_{s}", "acc", "Accuracy (most likely option)") for s in ("bio", "chem", "cyber")),
)
