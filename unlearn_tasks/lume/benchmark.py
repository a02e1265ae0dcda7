"""LUME's declaration: its tasks (``lume`` and ``lume_*``), the rows of its ``unlearn report`` table and the
direction of its metrics."""

from unlearn_tasks.benchmarks import Benchmark

BENCHMARK = Benchmark(
    name="lume",
    tasks=("lume",),
    # per sub-task: forget then retain; the MIA task; the ``lume`` group's aggregate (its row in the results)
    rows=(
        ("forget_regurgitation", "Forget regurgitation (ROUGE-L recall)"),
        ("forget_knowledge", "Forget knowledge (exact match)"),
        ("retain_regurgitation", "Retain regurgitation (ROUGE-L recall)"),
        ("retain_knowledge", "Retain knowledge (exact match)"),
        ("mia_loss_auc", "MIA loss-attack AUC (member vs nonmember)"),
        ("mia_member_loss", "MIA member mean loss"),
        ("mia_nonmember_loss", "MIA nonmember mean loss"),
        ("mia_score", "MIA score (1 - 2 abs(AUC - 0.5))"),
        ("task_aggregate", "Task aggregate (harmonic mean of 12)"),
        ("mmlu_acc", "MMLU accuracy"),
        ("final_score", "Final score (mean of aggregate, MIA score, MMLU)"),
    ),
    # forget-set scores fall with unlearning; the AUC of a memorising model (near 1) falls towards 0.5 (the MIA
    # score, higher is better, also penalises falling below 0.5); the member loss rises
    lower_is_better=frozenset({"forget_regurgitation", "forget_knowledge", "mia_loss_auc"}),
)
