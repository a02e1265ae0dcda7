"""WaterDrum's declaration: its tasks and the direction of its metrics (its report uses the TOFU order)."""

from unlearn_tasks.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="waterdrum",
    tasks=("waterdrum",),
    # metrics where a smaller value means better unlearning or a cleaner control
    lower_is_better=frozenset({"forget_strength", "other_id_strength", "forget_rougeL_recall", "forget_knowmem",
                               "retain_min_k"}),
)
