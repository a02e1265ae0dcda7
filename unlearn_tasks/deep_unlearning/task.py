"""The lm-eval tasks ``evaldu`` and ``mquake_du``: one greedy short answer per fact, per-fact correctness, and
Success-DU / Recall / Accuracy at corpus level.

Options come from the task metadata (``--metadata '{...}'``; :class:`DeepUnlearningOptions` declares them).
Without ``target`` every metric is the mean over all targets, since one model's per-fact correctness serves every
target.

The per-fact correctness vectors (and the per-target scores) are written into the results file under
``configs.<task>.deep_unlearning``, so ``unlearn deep-unlearning score`` / ``sweep`` can rescore any target later.
"""

from __future__ import annotations

import functools
import json
import logging
import math
from pathlib import Path
from typing import Any

import datasets

from harness_ext.provenance import note_data_source
from harness_ext.task_base import UnlearningTask
from unlearn_tasks.deep_unlearning.options import DeepUnlearningOptions, resolve_data_dir

from .knowledge_base import KnowledgeBase, evaluation_questions, load_evaldu
from .metrics import answer_is_correct, score_targets
from .mquake import load_mquake

log = logging.getLogger(__name__)

METRICS = ("success_du", "recall", "acc_relationships", "acc_biographies", "acc_all")
MISSING_DATA = (
    "{task}: no Eval-DU knowledge base given. Pass the JSON folder (or a clone of the upstream release, "
    "https://github.com/wrh14/deep_unlearning, whose synthetic_data/*.pt files are read without executing "
    "pickled code) with --metadata '{{\"data_dir\": \"DIR\"}}', or put it at $UNLEARN_DATA_DIR/wrh14/deep_unlearning."
)


@functools.lru_cache(maxsize=4)
def _load_kb(benchmark: str, path: str, fix_rule_typos: bool) -> KnowledgeBase:
    if benchmark == "mquake":
        return load_mquake(path)
    return load_evaldu(path, fix_rule_typos=True) if fix_rule_typos else load_evaldu(path)


def load_kb_from_options(options: DeepUnlearningOptions, task: str = "evaldu") -> tuple[KnowledgeBase, str]:
    """The knowledge base the options name and the path it came from; ``ValueError`` if none."""
    if options.benchmark == "mquake":
        path = options.mquake_path
        if not path:
            raise ValueError(
                f"{task}: pass the local MQuAKE file (e.g. MQuAKE-CF-3k-v2.json from the MQuAKE repository) with "
                "--metadata '{\"mquake_path\": \"FILE\"}'"
            )
        note_data_source("local", "mquake", path=Path(path).expanduser())
        return _load_kb("mquake", str(Path(path).expanduser()), False), str(path)
    directory = resolve_data_dir(options.data_dir)
    if directory is None:
        raise ValueError(MISSING_DATA.format(task=task))
    note_data_source("local", "evaldu", path=directory)
    return _load_kb("evaldu", str(directory), options.fix_rule_typos), str(directory)


def _mean(values: list[Any]) -> float:
    finite = [float(v) for v in values if v is not None]
    return sum(finite) / len(finite) if len(finite) == len(values) and finite else math.nan


class DeepUnlearningTask(UnlearningTask):
    """Eval-DU or MQuAKE deep-unlearning evaluation of one model (see the module doc for the options)."""

    RESULTS_KEY = "deep_unlearning"

    def setup(self, config: dict) -> None:
        self.options = options = DeepUnlearningOptions.from_metadata(config.get("metadata"))  # metric_modes: target
        self.kb, self.kb_path = load_kb_from_options(options, config.get("task", "evaldu"))
        self.target = None if options.target is None else self.kb.check_target(options.target)
        if not self.kb.targets and self.target is None:
            raise ValueError(f"{self.kb.name} lists no targets; pass --metadata '{{\"target\": ID}}'")
        self._record: dict[str, Any] | None = None

    def metric_names(self) -> list[str]:
        return list(METRICS)

    def download(self, dataset_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Documents are the knowledge base's questions, relationships first (no Hub download)."""
        docs = [{**d, "aliases": json.dumps(d["aliases"])} for d in evaluation_questions(self.kb)]
        self.dataset = datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})

    def doc_to_text(self, doc: dict, doc_to_text: Any = None) -> str:
        return f"Question: {doc['question']}\n"

    def doc_to_target(self, doc: dict, doc_to_target: Any = None) -> str:
        return doc["answer"]

    def score_document(self, doc: dict, results: list) -> dict:
        generated = results[0] if results else ""
        correct = answer_is_correct(generated, doc["answer"], json.loads(doc["aliases"]))
        return {"kind": doc["kind"], "index": int(doc["index"]), "correct": bool(correct)}

    def correctness_vectors(self, records: list[dict]) -> tuple[list[bool], list[bool]] | None:
        """Per-fact correctness in fact order, or None when some facts were not evaluated (``--limit``)."""
        rel: list[bool | None] = [None] * self.kb.n_relationships
        bio: list[bool | None] = [None] * self.kb.n_biographies
        for r in records:
            (rel if r["kind"] == "relationship" else bio)[r["index"]] = r["correct"]
        if None in rel or None in bio:
            return None
        return rel, bio  # type: ignore[return-value]

    def compute_metrics(self, records: list[dict]) -> dict[str, float]:
        vectors = self.correctness_vectors(records)
        if vectors is None:
            log.warning("%s: only %d of %d facts evaluated (--limit?); deep-unlearning metrics need every fact, "
                        "reporting NaN", self.config.task, len(records), self.kb.n_relationships + self.kb.n_biographies)
            return {m: math.nan for m in METRICS}
        rel, bio = vectors
        targets = [self.target] if self.target is not None else None
        scores = score_targets(rel, bio, self.kb, targets)
        self._record = {
            "knowledge_base": self.kb.name, "path": self.kb_path, "target": self.target,
            "relationships": rel, "biographies": bio,
            "per_target": [{k: s[k] for k in ("target", *METRICS, "best_minimal_set")} for s in scores],
        }
        return {m: _mean([s[m] for s in scores]) for m in METRICS}

    def results_record(self) -> dict | None:
        """The per-fact correctness vectors and per-target scores, for later rescoring."""
        return self._record
