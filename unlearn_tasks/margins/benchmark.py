"""The margins tasks' declaration (inputs of KLoM / U-LiRA): their tasks and the direction of their metrics."""

from unlearn_tasks.benchmarks import Benchmark

BENCHMARK = Benchmark(name="margins", tasks=("margins",), lower_is_better=frozenset({"margin_forget"}))
