"""Deep unlearning (Eval-DU, MQuAKE): knowledge bases, deductive closure, minimal sets and metrics.

Pure logic, no lm-eval: the task glue and the command line call these functions.
"""

from .closure import DeductiveClosure, deductive_closure
from .family_rules import FAMILY_RELATION_CONDITIONS, Rule, family_rules
from .generator import generate_evaldu, write_generated_evaldu
from .knowledge_base import (
    KnowledgeBase,
    evaluation_questions,
    load_evaldu,
    load_evaldu_json,
    load_evaldu_torch,
    write_evaldu_json,
)
from .metrics import (
    accuracy_recall_auc,
    answer_is_correct,
    best_matching_set,
    score,
    score_targets,
    set_recall_and_accuracy,
    sweep_summary,
)
from .minimal_sets import find_minimal_set, find_minimal_sets, is_minimal_deep_unlearning_set
from .mquake import build_mquake_kb, load_mquake
from .plot import plot_recall_accuracy

__all__ = [
    "FAMILY_RELATION_CONDITIONS",
    "DeductiveClosure",
    "KnowledgeBase",
    "Rule",
    "accuracy_recall_auc",
    "answer_is_correct",
    "best_matching_set",
    "build_mquake_kb",
    "deductive_closure",
    "evaluation_questions",
    "family_rules",
    "find_minimal_set",
    "find_minimal_sets",
    "generate_evaldu",
    "is_minimal_deep_unlearning_set",
    "load_evaldu",
    "load_evaldu_json",
    "load_evaldu_torch",
    "load_mquake",
    "plot_recall_accuracy",
    "score",
    "score_targets",
    "set_recall_and_accuracy",
    "sweep_summary",
    "write_evaldu_json",
    "write_generated_evaldu",
]
