"""KnowUnDo's data source for ``unlearn run --data knowundo``: the domain's Unlearn scope as the forget set and its
Retention scope as the retain set (the ``train`` lists, which the release unlearns on; its evaluation reads
``val``), as question-answer pairs (the request, with the release's instruction when ``--knowundo-direct-prompt``,
and its answer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from unlearn_methods.data_sources import DataSource, register
from unlearn_methods.params import option
from unlearn_tasks.knowundo.data import load_pairs, request
from unlearn_tasks.knowundo.options import DOMAINS, HUB_ID


def qa_records(pairs: list[dict], domain: str, direct_prompt: bool) -> list[dict]:
    """``{"question", "answer"}`` records of KnowUnDo pairs."""
    return [{"question": request(domain, p["text"], direct_prompt), "answer": p["labels"]} for p in pairs]


@register
class Knowundo(DataSource):
    """KnowUnDo (copyright / privacy): forget the domain's Unlearn scope, retain its Retention scope."""

    name = "knowundo"
    help = "'knowundo' (zjunlp/KnowUnDo: --knowundo-domain copyright|privacy; Unlearn scope forgotten, Retention kept)"

    @dataclass
    class Options:
        knowundo_domain: str = option("copyright", "The domain whose Unlearn scope is forgotten "
                                      "and whose Retention scope is kept.", choices=DOMAINS, resume=True)
        knowundo_direct_prompt: bool = option(False, "Put the release's domain instruction "
                                              "before each request when training (the release trains without it).",
                                              resume=True)

    def dataset(self, data: str) -> str:
        return HUB_ID

    def resolve_splits(self, cfg) -> None:
        cfg.forget = f"{cfg.knowundo_domain}_unlearn"
        cfg.retain = cfg.retain or f"{cfg.knowundo_domain}_retention"

    def load(self, cfg, data_dir: str | None) -> tuple[list[dict], list[dict]]:
        domain = cfg.knowundo_domain
        forget = load_pairs(domain, "unlearn", "train", HUB_ID, data_dir)
        retain = load_pairs(domain, "retention", "train", HUB_ID, data_dir)
        return (qa_records(forget, domain, cfg.knowundo_direct_prompt),
                qa_records(retain, domain, cfg.knowundo_direct_prompt))

    eval_args = "--tasks knowundo_{knowundo_domain}"

    def eval_metadata(self, cfg) -> dict[str, Any]:
        return {}
