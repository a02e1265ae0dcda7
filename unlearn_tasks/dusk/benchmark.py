"""DUSK's declaration: its tasks (``dusk`` and ``dusk_*``), the rows of its ``unlearn report`` table and the
direction of its metrics."""

from unlearn_tasks.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="dusk",
    tasks=("dusk",),
    # the paper's seven measures in its order (downstream capability comes from lm-eval's own tasks)
    rows=(
        ("verbatim_rougeL", "Verbatim memorisation (ROUGE-L F1 of 128-token continuations)"),
        ("unique_forget_rougeL", "Unique forget knowledge (ROUGE-L F1, forget-only QA)"),
        ("shared_rougeL", "Shared knowledge (ROUGE-L F1, QA on facts in every style)"),
        ("unique_retain_rougeL", "Unique retain knowledge (ROUGE-L F1, retain-only QA)"),
        ("privleak", "Privacy leakage (%, Min-K%++ AUROC forget vs holdout, vs retrained)"),
        ("retain_deviation", "Retain deviation (%, absolute change of the holdout-vs-retain AUROC from retrained)"),
        ("verbatim_rougeL_recall", "Verbatim memorisation (ROUGE-L recall)"),
        ("unique_forget_rougeL_recall", "Unique forget knowledge (ROUGE-L recall)"),
        ("shared_rougeL_recall", "Shared knowledge (ROUGE-L recall)"),
        ("unique_retain_rougeL_recall", "Unique retain knowledge (ROUGE-L recall)"),
        ("verbatim_rouge1", "Verbatim memorisation (ROUGE-1 F1)"),
        ("verbatim_lcs", "Verbatim memorisation (longest common word subsequence, words)"),
        ("verbatim_levenshtein", "Verbatim distance (character edits to the true text)"),
        ("auc_forget_holdout", "Min-K%++ AUROC, forget (0) vs holdout (1)"),
        ("auc_holdout_retain", "Min-K%++ AUROC, holdout (0) vs retain (1)"),
    ),
    # verbatim overlap and forget-only knowledge fall with unlearning (the Levenshtein distance rises: higher is
    # better); shared and retain-only knowledge should stay. privleak is best near 0 (marked as MUSE's: gate on
    # abs(dusk_privacy/privleak) in `unlearn ci`); retain deviation is an absolute change, 0 is ideal.
    lower_is_better=frozenset({
        *(f"{p}_{k}" for p in ("verbatim", "unique_forget") for k in ("rougeL", "rougeL_recall", "rouge1",
                                                                       "rouge1_recall")),
        "verbatim_lcs", "privleak", "retain_deviation",
    }),
)
