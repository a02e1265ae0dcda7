"""The TOFU data-transformation formats' (ReLU) declaration: their tasks. Their metric directions depend on the
task (a forget split's score, a pair's forget score and gap are lower-is-better): :class:`ReluTask` sets them."""

from unlearn_tasks.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="tofu_formats",
    tasks=("tofu_formats", "tofu_mcqa", "tofu_cloze", "tofu_analogy_mcqa", "tofu_analogy_qa", "tofu_odd_one_out",
           "tofu_comprehension_mcqa", "tofu_comprehension_qa"),
)
