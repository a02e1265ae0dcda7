"""BLUR's data source for ``unlearn run --data blur``: a source's forget queries with the base model's answers as
the forget set, its retain queries with the base model's answers as the retain set (question-answer pairs).

BLUR ships queries, not answers: the answers are the base model's own (``unlearn blur-references``), the same text
the tasks score against, so unlearning pushes exactly those answers away on the forget queries and keeps them on the
retain queries. The release's own experiments unlearn on the source benchmark's corpora (for RWKU: ``--data rwku``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from unlearn_methods.data_sources import DataSource, register
from unlearn_methods.params import option
from unlearn_tasks.blur.data import load_texts, stem
from unlearn_tasks.blur.options import HUB_ID, SOURCES
from unlearn_tasks.blur.references import load_references
from unlearn_tasks.dataset_loader import DataError


def answered(name: str, references: dict[str, dict[str, str]], data_dir: str | None) -> list[dict]:
    """The queries of one BLUR file with the base model's answers, as ``{"question", "answer"}`` records."""
    texts, where = load_texts(name, HUB_ID, data_dir)
    answers = references.get(name, {})
    missing = [t for t in texts if t not in answers]
    if missing:
        raise DataError(f"{len(missing)} of the {len(texts)} queries of {name} ({where}) have no base-model answer in "
                        "--blur-references; write them for this data with `unlearn blur-references`.")
    return [{"question": t, "answer": answers[t]} for t in texts]


@register
class Blur(DataSource):
    """BLUR: forget a source's forget queries (answered by the base model), retain its retain queries."""

    name = "blur"
    help = "'blur' (forgelab/BLUR: --blur-source rwku|whp, --blur-references DIR from `unlearn blur-references`)"

    @dataclass
    class Options:
        blur_source: str = option("rwku", "The source whose forget queries are unlearned and retain "
                                  "queries kept (the release has both for rwku and whp).", choices=SOURCES, resume=True)
        blur_references: str | None = option(None, "The base model's answers (the folder or file "
                                             "`unlearn blur-references` wrote); they are the training answers.",
                                             resume=True, path=True, metavar="PATH")

    def dataset(self, data: str) -> str:
        return HUB_ID

    def check(self, cfg) -> None:
        if not cfg.blur_references:
            raise ValueError("--data blur needs --blur-references PATH (the base model's answers: `unlearn "
                             "blur-references --model BASE --out DIR`).")
        names = [stem(cfg.blur_source, s) for s in ("forget", "retain")]
        forget = names[0] if cfg.forget == "forget10" else cfg.forget  # forget10: unlearn run's default split name
        if forget not in names:
            raise ValueError(f"--forget {cfg.forget!r} is not a BLUR query file of --blur-source {cfg.blur_source}; "
                             f"use {' or '.join(names)} (default {names[0]}).")
        if cfg.retain is not None and (cfg.retain not in names or cfg.retain == forget):
            raise ValueError(f"--retain {cfg.retain!r} is not a BLUR query file of --blur-source {cfg.blur_source} "
                             f"other than the forget one; use {' or '.join(n for n in names if n != forget)}.")

    def resolve_splits(self, cfg) -> None:
        names = [stem(cfg.blur_source, s) for s in ("forget", "retain")]
        if cfg.forget == "forget10":
            cfg.forget = names[0]
        cfg.retain = cfg.retain or next(n for n in names if n != cfg.forget)

    def load(self, cfg, data_dir: str | None) -> tuple[list[dict], list[dict]]:
        references = load_references(cfg.blur_references).answers
        return answered(cfg.forget, references, data_dir), answered(cfg.retain, references, data_dir)

    eval_args = "--tasks blur_{blur_source} --metadata '{blur_metadata}'"

    def template_fields(self, cfg) -> dict[str, Any]:
        metadata = self.eval_metadata(cfg)
        if os.path.isabs(metadata["blur_references"]):  # shared in the model card: by name (its hash is listed there)
            metadata["blur_references"] = os.path.basename(os.path.normpath(metadata["blur_references"]))
        return {**super().template_fields(cfg), "blur_metadata": json.dumps(metadata)}

    def eval_metadata(self, cfg) -> dict[str, Any]:
        return {"blur_references": str(cfg.blur_references)}
