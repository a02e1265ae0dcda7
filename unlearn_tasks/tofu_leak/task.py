"""The lm-eval task class behind ``tofu_forget{01,05,10}_leak``: Leak@k (arXiv 2511.04934, code OptimAI-Lab/Leak-k)
on TOFU's forget questions.

Each question is asked ``leak_n`` times with sampling, through lm-eval's own ``repeats``: one request per question,
lm-eval sends it ``leak_n`` times and hands back every answer. Each answer gets its ROUGE-L recall against the
forget answer and, under the release's criterion, an NLI model's verdict on (answer, forget answer); a sample leaks
when its recall reaches ``leak_threshold`` (and, under ``entailment``, the verdict is ``entailment``). ``leak_at_K``
is the mean over questions of the unbiased estimator :func:`unlearn_tasks.metrics.leak.leak_at_k`. The per-sample
scores and verdicts are each document's record (lm-eval's samples), so Leak@k can be recomputed from them.
"""

from __future__ import annotations

from typing import Any

from lm_eval.api.instance import Instance

from harness_ext.task_base import UnlearningTask
from unlearn_tasks.dataset_loader import check_rows, load_config, source_name
from unlearn_tasks.metrics.leak import mean_leak_at_k
from unlearn_tasks.metrics.rouge import rouge_l_recall
from unlearn_tasks.prompts import chat_messages, question_prompt, tofu_generation_prompt
from unlearn_tasks.tofu_leak.options import TofuLeakOptions

#: The label of the release's NLI model for a sample that states the answer.
ENTAILMENT = "entailment"


def metric_name(k: int) -> str:
    return f"leak_at_{k}"


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


class TofuLeakTask(UnlearningTask):
    """Leak@k of one TOFU forget split; options from the task metadata (:class:`TofuLeakOptions`)."""

    def setup(self, config: dict) -> None:
        self.options = TofuLeakOptions.from_metadata(config.get("metadata"))
        o = self.options
        config["repeats"] = o.leak_n
        config["generation_kwargs"] = {**config.get("generation_kwargs", {}), "do_sample": True,
                                       "temperature": o.leak_temperature, "top_p": o.leak_top_p,
                                       "max_gen_toks": o.leak_max_new_tokens}
        config["filter_list"] = [{"name": "none", "filter": []}]  # every sample, not lm-eval's default take_first
        if o.leak_criterion == "entailment":  # load the NLI model now: a wrong name fails before any sampling
            from unlearn_tasks.classifier import pair_labels

            pair_labels(o.leak_nli_model, [])

    def metric_names(self) -> list[str]:
        return [metric_name(k) for k in self.options.leak_k]

    def lower_is_better(self) -> set[str]:
        return set(self.metric_names())

    def metric_modes(self) -> dict[str, Any]:
        """The options, and the sampling arguments the requests carried (``--gen_kwargs`` may have changed them)."""
        modes = {**super().metric_modes(), "leak_k": list(self.options.leak_k)}
        if self.options.leak_criterion != "entailment":
            modes.pop("leak_nli_model", None)
        sent = self.config.generation_kwargs or {}
        modes["sampling"] = {key: sent.get(key) for key in ("do_sample", "temperature", "top_p", "max_gen_toks")}
        return modes

    # ------------------------------------------------------------------ prompts and requests
    def doc_to_text(self, doc: dict, doc_to_text: Any = None) -> str:
        return question_prompt(doc["question"])

    def doc_to_target(self, doc: dict, doc_to_target: Any = None) -> str:
        return doc["answer"]

    def chat_messages(self, doc: dict) -> list[dict[str, str]]:
        return chat_messages(doc["question"])

    def construct_requests(self, doc: dict, ctx: str, **kwargs: Any) -> list[Instance]:
        chat = bool(kwargs.pop("apply_chat_template", False))
        kwargs.pop("chat_template", None)
        prompt = tofu_generation_prompt(ctx) if self.options.generation_prompt == "tofu" and not chat else ctx
        args = (prompt, dict(self.config.generation_kwargs))
        return [Instance(request_type="generate_until", doc=doc, arguments=args, idx=0, **kwargs)]

    # ------------------------------------------------------------------ scoring
    def score_document(self, doc: dict, results: list) -> dict:
        """The document's samples, their ROUGE-L recall, verdicts (``entailment`` criterion) and leak flags."""
        samples = [s.strip() for s in results[0]]
        o = self.options
        recalls = [rouge_l_recall(doc["answer"], s) for s in samples]
        record: dict[str, Any] = {"index": doc["index"], "n": len(samples), "rougeL_recall": recalls}
        leaked = [r >= o.leak_threshold for r in recalls]
        if o.leak_criterion == "entailment":
            from unlearn_tasks.classifier import pair_labels

            gated = [i for i, ok in enumerate(leaked) if ok and samples[i]]  # the release asks the NLI model only these
            labels = dict(zip(gated, pair_labels(o.leak_nli_model, [(samples[i], doc["answer"]) for i in gated])))
            record["nli_label"] = [labels.get(i) for i in range(len(samples))]
            leaked = [labels.get(i) == ENTAILMENT for i in range(len(samples))]
        record["leaked"] = leaked
        record["leaks"] = sum(leaked)
        return record

    def compute_metrics(self, records: list[dict]) -> dict[str, float]:
        n = self.options.leak_n
        short = [r["index"] for r in records if r["n"] != n]
        if short:
            raise ValueError(f"{self.config.task}: questions {short[:5]} got fewer than leak_n={n} samples "
                             "(does the backend honour lm-eval's repeats?)")
        counts = [r["leaks"] for r in records]
        return {metric_name(k): mean_leak_at_k(counts, n, k) for k in self.options.leak_k}
