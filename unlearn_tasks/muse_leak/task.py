"""The lm-eval task class behind ``muse_{news,books}_{knowmem,verbmem}_leak``: Leak@k (arXiv 2511.04934, code
OptimAI-Lab/Leak-k) on MUSE's forget sets.

KnowMem: each forget question, after MUSE's few-shot examples, is answered ``leak_n`` times with sampling; VerbMem:
each forget passage's prefix is continued ``leak_n`` times. Each sample is scored against the true answer (the
whole true continuation for VerbMem) by the release's criterion (:func:`unlearn_tasks.leak_task.answer_leaks`).
"""

from __future__ import annotations

from typing import Any

from unlearn_tasks.leak_task import LeakTask, answer_leaks
from unlearn_tasks.muse_leak.options import MuseLeakOptions


def load_leak_docs(**metadata: Any):
    """lm-eval ``custom_dataset`` entry point: the forget set of the options' part, in the Hub's order, built by the
    MUSE tasks' own loader (KnowMem's prompts carry the few-shot examples)."""
    import datasets

    from unlearn_tasks.muse.documents import build_docs
    from unlearn_tasks.muse.options import MuseOptions

    o = MuseLeakOptions.from_metadata(metadata)
    muse = MuseOptions(corpus=o.corpus, dataset_path=o.dataset_path, data_dir=o.data_dir,
                       muse_data_dir=o.muse_data_dir, parts=[o.part], max_items_per_split=o.max_items_per_split)
    docs = build_docs(muse, sets=(f"{o.part}_forget",))
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})


class MuseLeakTask(LeakTask):
    """Leak@k of one MUSE forget set; options from the task metadata (:class:`MuseLeakOptions`)."""

    OPTIONS = MuseLeakOptions

    def doc_to_text(self, doc: dict, doc_to_text: Any = None) -> str:
        return doc["prompt"]

    def doc_to_target(self, doc: dict, doc_to_target: Any = None) -> str:
        return doc["reference"]

    def chat_messages(self, doc: dict) -> list[dict[str, str]] | None:
        """KnowMem: the few-shot pairs as chat turns (as the MUSE tasks); VerbMem: raw text, never chat-formatted."""
        if self.options.part != "knowmem":
            return None
        from unlearn_tasks.muse.prompts import knowmem_messages

        return knowmem_messages(doc["question"], list(zip(doc["icl_questions"], doc["icl_answers"], strict=True)))

    def leak_record(self, doc: dict, samples: list[str]) -> dict[str, Any]:
        o = self.options
        return answer_leaks(samples, doc["reference"].strip(), o.leak_criterion, o.leak_threshold, o.leak_nli_model)
