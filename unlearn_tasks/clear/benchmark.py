"""CLEAR's declaration: its tasks and the direction of its metrics (its report uses the TOFU order)."""

from unlearn_tasks.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="clear",
    tasks=("clear",),
    lower_is_better=frozenset({f"{s}_{m}" for s in ("forget_caption", "forget_facerec")
                               for m in ("prob", "rougeL_recall", "truth_ratio")} | {"forget_score"}),
)
