"""KnowUnDo's declaration: its tasks (``knowundo`` and ``knowundo_*``), the rows of its ``unlearn report`` table and
the direction of its metrics."""

from unlearn_tasks.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="knowundo",
    tasks=("knowundo",),
    # the paper's table order: Unlearn Success, Retention Success, then the perplexities
    rows=(
        ("unlearn_success", "Unlearn Success (% of Unlearn-scope answer tokens not predicted)"),
        ("retention_success", "Retention Success (% of Retention-scope answer tokens predicted)"),
        ("unlearn_perplexity", "Perplexity of the Unlearn-scope answers"),
        ("retention_perplexity", "Perplexity of the Retention-scope answers"),
        ("unlearn_accuracy", "Token accuracy on the Unlearn scope (100 - Unlearn Success)"),
    ),
    # the unlearned model should not predict the Unlearn scope (its accuracy falls, its perplexity rises) and keep
    # the Retention scope (its perplexity stays low)
    lower_is_better=frozenset({"unlearn_accuracy", "retention_perplexity"}),
)
