"""The switches of a TOFU Leak@k evaluation (``tofu_forget{01,05,10}_leak``), read from the task's metadata."""

from __future__ import annotations

from dataclasses import dataclass

from unlearn_tasks.leak_task import AnswerLeakOptions
from unlearn_tasks.settings import param
from unlearn_tasks.tofu.options import GENERATION_PROMPTS
from unlearn_tasks.tofu.splits import FORGET_SPLITS, HUB_ID

LEAK_QUESTIONS = ("paraphrased_question", "question")


@dataclass
class TofuLeakOptions(AnswerLeakOptions):
    """Leak@k on TOFU's forget set (``tofu_forget{01,05,10}_leak``); defaults are the Leak-k release's."""

    WHERE = "TOFU Leak@k task"
    EXTRA_KEYS = frozenset({"version"})

    forget_split: str = param("forget10", "the forget split whose questions are asked", choices=FORGET_SPLITS)
    dataset_path: str = param(HUB_ID, "Hub id of a dataset in TOFU's schema")
    data_dir: str | None = param(None, "a local folder laid out like the Hub repository (see the TOFU tasks)")
    max_items_per_split: int | None = param(None, "keep the first N forget questions", ge=1)
    leak_question: str = param("paraphrased_question", "the question asked: TOFU's paraphrase (the release's) or "
                               "the original", choices=LEAK_QUESTIONS)
    generation_prompt: str = param(
        "lm_eval", "lm_eval: sample after `Question: q\\nAnswer:`; tofu: after `Question: q\\nAnswer: ` (trailing "
        "space); ignored with --apply_chat_template", choices=GENERATION_PROMPTS)
