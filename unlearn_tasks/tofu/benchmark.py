"""TOFU's declaration: its tasks, the rows of its ``unlearn report`` table and the direction of its metrics."""

from unlearn_tasks.benchmarks import Benchmark

MIA_AUCS = ("mia_min_k_auc", "mia_min_k_plus_plus_auc", "mia_loss_auc", "mia_zlib_auc")
#: open-unlearning's metrics (docs/open-unlearning.md): memorization of the forget answers, and the reference and
#: GradNorm MIAs; all fall with unlearning.
OPEN_UNLEARNING_LOWER = ("extraction_strength", "exact_memorization", "mia_reference_auc", "mia_gradnorm_auc")

BENCHMARK = Benchmark(
    name="tofu",
    tasks=("tofu",),
    # in the order the literature reports them
    rows=(
        ("forget_quality", "Forget Quality (KS p-value vs retain)"),
        ("model_utility", "Model Utility"),
        ("forget_rougeL_recall", "Forget ROUGE-L recall"),
        ("forget_prob", "Forget probability"),
        ("forget_truth_ratio", "Forget Truth Ratio"),
        ("retain_rougeL_recall", "Retain ROUGE-L recall"),
        ("retain_prob", "Retain probability"),
        ("retain_truth_ratio", "Retain Truth Ratio"),
        ("ra_rougeL_recall", "Real authors ROUGE-L recall"),
        ("ra_prob", "Real authors probability"),
        ("ra_truth_ratio", "Real authors Truth Ratio"),
        ("wf_rougeL_recall", "World facts ROUGE-L recall"),
        ("wf_prob", "World facts probability"),
        ("wf_truth_ratio", "World facts Truth Ratio"),
        ("mia_min_k_auc", "MIA Min-K% AUROC (forget vs holdout)"),
        ("mia_min_k_plus_plus_auc", "MIA Min-K%++ AUROC"),
        ("mia_loss_auc", "MIA LOSS AUROC"),
        ("mia_zlib_auc", "MIA zlib AUROC"),
        ("privleak", "PrivLeak (%, vs retain)"),
    ),
    # privleak: closest to 0 is best; "higher is better" of -|x| is not expressible in lm-eval, so it is marked
    # lower-is-better, i.e. a strongly negative value means forget data still leaks.
    lower_is_better=frozenset({"forget_rougeL_recall", "forget_prob", "privleak", *MIA_AUCS, *OPEN_UNLEARNING_LOWER}),
)
