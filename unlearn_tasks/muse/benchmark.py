"""MUSE's declaration: its tasks (``muse_news``, ``muse_books`` and their parts), the rows of its ``unlearn report``
table and the direction of its metrics."""

from unlearn_tasks.benchmarks import Benchmark

MIA_AUCS = ("mia_min_k_auc", "mia_min_k_plus_plus_auc", "mia_loss_auc", "mia_zlib_auc")
#: open-unlearning's teacher-forced memorization of the forget VerbMem passages (falls with unlearning).
MEMORIZATION = ("extraction_strength", "exact_memorization")
#: open-unlearning's optional MIAs on the PrivLeak passages (opt-in: docs/open-unlearning.md); they fall with unlearning.
OPEN_UNLEARNING_MIAS = ("mia_gradnorm_auc", "mia_reference_auc")

BENCHMARK = Benchmark(
    name="muse",
    tasks=("muse",),
    # in the paper's order (C1 - C4)
    rows=(
        ("forget_verbmem", "VerbMem on forget (ROUGE-L F1)"),
        ("forget_knowmem", "KnowMem on forget (ROUGE-L F1)"),
        ("privleak", "PrivLeak (%, vs retrained)"),
        ("retain_knowmem", "KnowMem on retain (utility, ROUGE-L F1)"),
        ("mia_min_k_auc", "MIA Min-K% AUROC (forget vs holdout)"),
        ("mia_min_k_plus_plus_auc", "MIA Min-K%++ AUROC"),
        ("mia_loss_auc", "MIA LOSS AUROC"),
        ("mia_zlib_auc", "MIA zlib AUROC"),
    ),
    # forget-set memorisation and MIA AUROCs fall with unlearning; privleak is best near 0 (marked as TOFU's)
    lower_is_better=frozenset({"forget_verbmem", "forget_knowmem", "privleak", *MIA_AUCS, *MEMORIZATION, *OPEN_UNLEARNING_MIAS}),
)
