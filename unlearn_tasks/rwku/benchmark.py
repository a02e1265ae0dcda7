"""RWKU's declaration: its tasks (``rwku`` and ``rwku_*``), the rows of its ``unlearn report`` table and the
direction of its metrics."""

from unlearn_tasks.benchmarks import Benchmark

MIA_ATTACKS = ("loss", "zlib", "min_k", "min_k_plus_plus")

BENCHMARK = Benchmark(
    name="rwku",
    tasks=("rwku",),
    # the paper's table order: forget set, neighbour set, MIA set
    rows=(
        ("forget_level1", "Forget L1 fill-in-the-blank (ROUGE-L recall)"),
        ("forget_level2", "Forget L2 question answering (ROUGE-L recall)"),
        ("forget_level3", "Forget L3 adversarial attacks (ROUGE-L recall)"),
        ("neighbor_level1", "Neighbour L1 fill-in-the-blank (ROUGE-L recall)"),
        ("neighbor_level2", "Neighbour L2 question answering (ROUGE-L recall)"),
        *((f"mia_forget_{a}", f"MIA forget member set, {a}") for a in MIA_ATTACKS),
        *((f"mia_retain_{a}", f"MIA retain member set, {a}") for a in MIA_ATTACKS),
        *((f"mia_{a}_auc", f"MIA {a} AUROC (forget vs retain)") for a in MIA_ATTACKS),
        ("utility_fluency", "Fluency (n-gram entropy of instruction answers)"),
    ),
    # forget probes and the forget member set's log-likelihood scores fall with unlearning; the AUROC of
    # forget (label 0) vs retain (label 1) over loss-like scores falls as the forget set looks less trained on.
    # Per attack type (forget_level3_<type>) the task reports the same direction as forget_level3.
    lower_is_better=frozenset({"forget_level1", "forget_level2", "forget_level3",
                               *(f"mia_forget_{a}" for a in MIA_ATTACKS), *(f"mia_{a}_auc" for a in MIA_ATTACKS)}),
)
