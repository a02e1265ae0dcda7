"""TOFU Leak@k's declaration: its tasks, its report rows (the release's k) and the direction of its metrics."""

from unlearn_tasks.benchmarks import Benchmark
from unlearn_tasks.metrics.leak import release_rows

BENCHMARK = Benchmark(
    name="tofu_leak",
    tasks=("tofu_forget01_leak", "tofu_forget05_leak", "tofu_forget10_leak"),
    rows=release_rows("Forget Leak@"),
    lower_is_better=frozenset(metric for metric, _ in release_rows("")),
    # the greedy forget ROUGE of the same split (the TOFU task; it asks the original questions, these the paraphrases)
    beside=tuple((f"tofu_{s}_leak", f"tofu_{s}", "forget_rougeL_recall", "Forget ROUGE-L recall (greedy)")
                 for s in ("forget01", "forget05", "forget10")),
)
