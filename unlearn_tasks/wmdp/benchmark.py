"""WMDP's declaration: the tasks are lm-eval's own; this gives their ``unlearn report`` row and direction."""

from unlearn_tasks.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="wmdp",
    tasks=("wmdp",),
    rows=(("acc", "Accuracy (4 options, chance 0.25; lower = more hazardous knowledge removed)"),),
    lower_is_better=frozenset({"acc"}),
)
