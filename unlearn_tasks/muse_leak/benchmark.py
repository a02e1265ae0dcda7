"""MUSE Leak@k's declaration: its tasks, its report rows (the release's k) and the direction of its metrics."""

from unlearn_tasks.benchmarks import Benchmark
from unlearn_tasks.metrics.leak import release_rows

BENCHMARK = Benchmark(
    name="muse_leak",
    tasks=tuple(f"muse_{corpus}_{part}_leak" for corpus in ("news", "books") for part in ("knowmem", "verbmem")),
    rows=release_rows("Forget Leak@"),
    lower_is_better=frozenset(metric for metric, _ in release_rows("")),
    # the greedy forget score of the same set, from the corpus task or its part task
    beside=tuple((f"muse_{c}_{part}_leak", greedy, f"forget_{part}", f"{label} on forget (greedy, ROUGE-L F1)")
                 for c in ("news", "books") for part, label in (("knowmem", "KnowMem"), ("verbmem", "VerbMem"))
                 for greedy in (f"muse_{c}", f"muse_{c}_{part}")),
)
