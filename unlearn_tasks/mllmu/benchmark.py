"""MLLMU-Bench's declaration: its tasks, its report rows and the direction of its metrics."""

from unlearn_tasks.benchmarks import Benchmark

SETS = ("forget", "test", "retain", "celebrity")
LABELS = {"forget": "Forget", "test": "Test (new photos, paraphrases)", "retain": "Retain", "celebrity": "Celebrity"}
METRICS = (("classification_acc", "classification accuracy"), ("cloze_acc", "fill-in-the-blank accuracy"),
           ("rougeL", "generation ROUGE-L"), ("bleu", "generation BLEU"), ("rouge1", "generation ROUGE-1"),
           ("rouge2", "generation ROUGE-2"))

BENCHMARK = Benchmark(
    name="mllmu",
    tasks=("mllmu",),
    # the paper's tables: per set (forget, test, retain, celebrity) classification, generation, cloze
    rows=tuple((f"{s}_{m}", f"{LABELS[s]} {label}") for s in SETS for m, label in METRICS),
    # the forget and test sets hold the people to forget: their scores fall with unlearning
    lower_is_better=frozenset(f"{s}_{m}" for s in ("forget", "test") for m, _ in METRICS),
)
