"""Deep unlearning's declaration: its tasks (every metric is reported as higher-is-better to lm-eval)."""

from unlearn_tasks.benchmarks import Benchmark

BENCHMARK = Benchmark(name="deep_unlearning", tasks=("evaldu", "mquake_du"))
