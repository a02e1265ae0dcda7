"""The lm-eval task class behind ``tofu_forget{01,05,10}_leak``: Leak@k (arXiv 2511.04934, code OptimAI-Lab/Leak-k)
on TOFU's forget questions.

Each question is asked ``leak_n`` times with sampling (:class:`unlearn_tasks.leak_task.LeakTask`); each answer is
scored against the forget answer by the release's criterion (:func:`unlearn_tasks.leak_task.answer_leaks`), and
``leak_at_K`` is the mean over questions of the unbiased estimator.
"""

from __future__ import annotations

from typing import Any

from unlearn_tasks.dataset_loader import check_rows, load_config, source_name
from unlearn_tasks.leak_task import LeakTask, answer_leaks
from unlearn_tasks.prompts import chat_messages, question_prompt, tofu_generation_prompt
from unlearn_tasks.tofu_leak.options import TofuLeakOptions


def load_leak_docs(forget_split: str = "forget10", dataset_path: str | None = None, data_dir: str | None = None,
                   max_items_per_split: int | None = None, leak_question: str = "paraphrased_question",
                   **_: Any):
    """lm-eval ``custom_dataset`` entry point: the forget questions (``{forget_split}_perturbed``, which carries the
    paraphrased questions), in file order."""
    import datasets

    from unlearn_tasks.tofu.splits import HUB_ID

    repo = dataset_path or HUB_ID
    config = f"{forget_split}_perturbed"
    columns = ("question", "answer", leak_question)
    rows = load_config(repo, config, columns, data_dir=data_dir).to_list()[:max_items_per_split]
    check_rows(rows, list(columns), source_name(repo, config, data_dir))
    docs = [{"id": f"forget/{i}", "split": "forget", "index": i, "question": r[leak_question], "answer": r["answer"]}
            for i, r in enumerate(rows)]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})


class TofuLeakTask(LeakTask):
    """Leak@k of one TOFU forget split; options from the task metadata (:class:`TofuLeakOptions`)."""

    OPTIONS = TofuLeakOptions

    def doc_to_text(self, doc: dict, doc_to_text: Any = None) -> str:
        return question_prompt(doc["question"])

    def doc_to_target(self, doc: dict, doc_to_target: Any = None) -> str:
        return doc["answer"]

    def chat_messages(self, doc: dict) -> list[dict[str, str]]:
        return chat_messages(doc["question"])

    def sampling_prompt(self, ctx: str, chat: bool) -> str:
        return tofu_generation_prompt(ctx) if self.options.generation_prompt == "tofu" and not chat else ctx

    def leak_record(self, doc: dict, samples: list[str]) -> dict[str, Any]:
        o = self.options
        return answer_leaks(samples, doc["answer"], o.leak_criterion, o.leak_threshold, o.leak_nli_model)
