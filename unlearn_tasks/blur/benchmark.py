"""BLUR's declaration: its tasks (``blur`` and ``blur_*``), the rows of its ``unlearn report`` table and the direction
of its metrics."""

from unlearn_tasks.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="blur",
    tasks=("blur",),
    rows=(
        ("forget_rougeL_recall", "Forget queries: ROUGE-L recall against the base model's answers"),
        ("retain_rougeL_recall", "Retain queries: ROUGE-L recall against the base model's answers"),
        ("combined_rougeL_recall", "Combined forget+retain queries: ROUGE-L recall against the base model's answers"),
    ),
    # forget answers should move away from what the base model said; retain answers (alone, or inside a combined
    # query) should stay
    lower_is_better=frozenset({"forget_rougeL_recall"}),
)
