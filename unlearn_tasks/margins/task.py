"""The ``margins_*`` lm-eval tasks: per document, the teacher-forced margins ``z_y - logsumexp_{v != y} z_v`` of
the target tokens and their per-sequence reduction, written into the results file (``configs.<task>.
unlearning_margins``) so that ``unlearn klom`` / ``unlearn ulira`` / ``unlearn margins gather`` can stack the
runs of many models into an ensemble.

* ``margins_tofu_forget01/05/10``: TOFU's forget set, ``retain_perturbed`` (split ``retain``) and the holdout set
  of the same size (split ``holdout``, never trained on), prompts as in the TOFU tasks.
* ``margins``: any local JSON / JSON-lines file of ``{"prompt", "target"}`` pairs or ``{"text"}`` records
  (``--metadata '{"data_file": "FILE"}'``), with an optional ``split`` field.

Margins come from the ``unlearn_answer_logprobs`` request: on ``hf`` exactly from the logits, on ``vllm`` as
``log p - log(1 - p)`` of the chosen token's log-prob (the same quantity). The request appends EOS to the target;
its margin is left out unless ``include_eos`` is true.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import datasets
import numpy as np

from harness_ext.instances import new_request
from harness_ext.request_types import ANSWER_LOGPROBS
from harness_ext.task_base import UnlearningTask
from unlearn_tasks.dataset_loader import read_json_lines
from unlearn_tasks.margins.benchmark import BENCHMARK
from unlearn_tasks.margins.ensemble import RECORD_FORMAT, RESULTS_KEY, sample_hash
from unlearn_tasks.margins.options import MarginOptions
from unlearn_tasks.metrics.klom import margins_from_logprobs, reduce_token_margins
from unlearn_tasks.prompts import ANSWER_DELIMITER, chat_messages, question_prompt


# --------------------------------------------------------------------------- documents
def _read_records(path: Path) -> list[dict]:
    if not path.is_file():
        raise ValueError(f"margins data file {path} does not exist")
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
        records = data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        records = [line.value for line in read_json_lines(path, text=text, error=lambda n, e: ValueError(
            f"{path}: line {n} is not valid JSON ({e.msg})"))]
    if not records:
        raise ValueError(f"{path} holds no records")
    return records


def file_docs(opts: MarginOptions) -> list[dict[str, Any]]:
    """Documents of a local file: prompt/target pairs or plain texts (scored from the first token)."""
    path = Path(opts.data_file or "")
    docs = []
    for i, rec in enumerate(_read_records(path)):
        if not isinstance(rec, dict):
            raise ValueError(f"{path}: record {i} is not a JSON object")
        if opts.target_field in rec:
            prompt, target = str(rec.get(opts.prompt_field, "")), str(rec[opts.target_field])
        elif opts.text_field in rec:
            prompt, target = "", str(rec[opts.text_field])
        else:
            raise ValueError(f"{path}: record {i} has neither {opts.target_field!r} (with {opts.prompt_field!r}) nor "
                             f"{opts.text_field!r}; rename the fields or set prompt_field / target_field / text_field")
        docs.append({"split": str(rec.get(opts.split_field, "all")), "prompt": prompt, "target": target,
                     "question": prompt, "style": "raw"})
    return docs


def tofu_docs(opts: MarginOptions) -> list[dict[str, Any]]:
    """TOFU forget / retain / holdout questions of ``opts.forget_split``, interleaved as in the TOFU tasks."""
    from unlearn_tasks.tofu.documents import build_docs
    from unlearn_tasks.tofu.splits import HUB_ID

    built = build_docs(opts.forget_split, opts.dataset_path or HUB_ID, opts.data_dir, ["forget", "retain", "holdout"],
                       opts.max_items_per_split)
    return [{"split": d["split"], "prompt": question_prompt(d["question"]), "target": d["answer"],
             "question": d["question"], "style": "tofu"} for d in built]


def load_docs(**metadata: Any) -> datasets.DatasetDict:
    """lm-eval ``custom_dataset`` entry point (metadata arrives as keywords)."""
    opts = MarginOptions.from_metadata(metadata)
    docs = tofu_docs(opts) if opts.benchmark == "tofu" else file_docs(opts)
    if opts.benchmark == "file" and opts.max_items_per_split:
        seen: dict[str, int] = {}
        docs = [d for d in docs if seen.setdefault(d["split"], 0) < opts.max_items_per_split
                and not seen.__setitem__(d["split"], seen[d["split"]] + 1)]
    for i, d in enumerate(docs):
        d["sample"] = i
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})


# --------------------------------------------------------------------------- the task
class MarginsTask(UnlearningTask):
    """Teacher-forced margins per document; metrics are the mean margin overall and per split."""

    RESULTS_KEY = RESULTS_KEY

    def setup(self, config: dict) -> None:
        self.options = MarginOptions.from_metadata(config.get("metadata"))
        self._names: list[str] | None = None
        self._record: dict | None = None

    def metric_names(self) -> list[str]:
        if self._names is None:
            splits = list(dict.fromkeys(d["split"] for d in self.test_docs()))
            self._names = ["margin"] + [f"margin_{s}" for s in splits]
        return self._names

    def lower_is_better(self) -> set[str]:
        return set(BENCHMARK.lower_is_better)

    def doc_to_text(self, doc: dict, doc_to_text: Any = None) -> str:
        return doc["prompt"]

    def doc_to_target(self, doc: dict, doc_to_target: Any = None) -> str:
        return doc["target"]

    def chat_messages(self, doc: dict) -> list[dict[str, str]] | None:
        """With ``--apply_chat_template`` the question (or prompt) is the user turn; plain texts are never wrapped."""
        return chat_messages(doc["question"]) if doc["prompt"] else None

    def construct_requests(self, doc: dict, ctx: str, **kwargs: Any) -> list:
        chat = bool(kwargs.pop("apply_chat_template", False)) and bool(doc["prompt"])
        kwargs.pop("chat_template", None)
        if doc["style"] == "tofu":
            continuation = doc["target"].strip() if chat else ANSWER_DELIMITER + doc["target"].strip()
        else:
            continuation = doc["target"]
        return [new_request(self, ANSWER_LOGPROBS, doc, (ctx, continuation), idx=0, **kwargs)]

    def score_document(self, doc: dict, results: list) -> dict:
        response = results[0]
        tokens = response.get("margins")
        if tokens is None:  # a backend that gives only log-probs: the same quantity from p
            tokens = margins_from_logprobs(response["logprobs"]).tolist()
        if not self.options.include_eos:
            tokens = tokens[:-1]  # the request appended EOS
        return {
            "sample": doc["sample"],
            "split": doc["split"],
            "key": f"{doc['prompt']}\x1f{doc['target']}",
            "margin": reduce_token_margins(tokens, self.options.reduction),
            "n_tokens": len(tokens),
            "tokens": [float(t) for t in tokens] if self.options.keep_token_margins else None,
        }

    def compute_metrics(self, records: list[dict]) -> dict[str, float]:
        ordered = sorted(records, key=lambda r: r["sample"])
        margins = np.array([r["margin"] for r in ordered], dtype=np.float64)
        splits: dict[str, list[int]] = {}
        for i, r in enumerate(ordered):
            splits.setdefault(r["split"], []).append(i)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN split stays NaN
            values = {"margin": float(np.nanmean(margins)) if margins.size else float("nan")}
            values.update({f"margin_{s}": float(np.nanmean(margins[idx])) for s, idx in splits.items()})
        self._record = {
            "format": RECORD_FORMAT,
            "reduction": self.options.reduction,
            "include_eos": self.options.include_eos,
            "margins": [None if np.isnan(m) else float(m) for m in margins],
            "n_tokens": [r["n_tokens"] for r in ordered],
            "splits": splits,
            "sample_hash": sample_hash([r["key"] for r in ordered]),
        }
        if self.options.keep_token_margins:
            self._record["token_margins"] = [r["tokens"] for r in ordered]
        return {m: values.get(m, float("nan")) for m in self.metric_names()}

    def results_record(self) -> dict | None:
        """Per-sample margins, splits and a fingerprint of the samples (see :mod:`unlearn_tasks.margins.ensemble`)."""
        return self._record
