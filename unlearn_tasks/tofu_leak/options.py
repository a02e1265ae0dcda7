"""The switches of a TOFU Leak@k evaluation (``tofu_forget{01,05,10}_leak``), read from the task's metadata."""

from __future__ import annotations

from dataclasses import dataclass

from unlearn_tasks.metadata import MetadataOptions
from unlearn_tasks.settings import param
from unlearn_tasks.tofu.options import GENERATION_PROMPTS
from unlearn_tasks.tofu.splits import FORGET_SPLITS, HUB_ID
from unlearn_tasks.tofu_leak.benchmark import RELEASE_K

#: Leak@k's per-sample criteria: the release's (an NLI model's entailment, on samples whose ROUGE-L recall reaches
#: the threshold) and ROUGE-L recall alone.
LEAK_CRITERIA = ("entailment", "rougeL_recall")
LEAK_QUESTIONS = ("paraphrased_question", "question")
#: The release's NLI model (OptimAI-Lab/Leak-k, TOFU/eval/whole_eval.py).
LEAK_NLI_MODEL = "sileod/deberta-v3-base-tasksource-nli"


@dataclass
class TofuLeakOptions(MetadataOptions):
    """Leak@k on TOFU's forget set (``tofu_forget{01,05,10}_leak``); defaults are the Leak-k release's."""

    WHERE = "TOFU Leak@k task"
    EXTRA_KEYS = frozenset({"version"})

    forget_split: str = param("forget10", "the forget split whose questions are asked", choices=FORGET_SPLITS)
    dataset_path: str = param(HUB_ID, "Hub id of a dataset in TOFU's schema")
    data_dir: str | None = param(None, "a local folder laid out like the Hub repository (see the TOFU tasks)")
    max_items_per_split: int | None = param(None, "keep the first N forget questions", ge=1)
    leak_n: int = param(200, "samples drawn per question (lm-eval's repeats)", ge=1)
    leak_k: list[int] = param(list(RELEASE_K), "the k of the reported leak_at_k metrics (each <= leak_n)")
    leak_temperature: float = param(1.0, "sampling temperature", gt=0)
    leak_top_p: float = param(1.0, "nucleus sampling's top_p", gt=0, le=1)
    leak_max_new_tokens: int = param(200, "most tokens generated per sample", ge=1)
    leak_question: str = param("paraphrased_question", "the question asked: TOFU's paraphrase (the release's) or "
                               "the original", choices=LEAK_QUESTIONS)
    leak_criterion: str = param(
        "entailment", "when a sample leaks: entailment (the release's: ROUGE-L recall against the answer >= "
        "leak_threshold and the NLI model says the sample entails the answer) or rougeL_recall (ROUGE-L recall >= "
        "leak_threshold alone)", choices=LEAK_CRITERIA)
    leak_threshold: float = param(0.1, "the ROUGE-L recall a leaking sample reaches", ge=0, le=1)
    leak_nli_model: str = param(LEAK_NLI_MODEL, "the NLI model of the entailment criterion (folder or Hub id)")
    generation_prompt: str = param(
        "lm_eval", "lm_eval: sample after `Question: q\\nAnswer:`; tofu: after `Question: q\\nAnswer: ` (trailing "
        "space); ignored with --apply_chat_template", choices=GENERATION_PROMPTS)

    def validate(self) -> None:
        ks = self.leak_k
        self.require([
            (isinstance(ks, list) and bool(ks) and all(isinstance(k, int) and not isinstance(k, bool) for k in ks),
             "leak_k must be a non-empty list of whole numbers"),
            (not isinstance(ks, list) or all(isinstance(k, int) and 1 <= k <= self.leak_n for k in ks),
             f"every leak_k must be between 1 and leak_n ({self.leak_n}), got {ks!r}"),
        ])
