"""KnowUnDo's data source for ``unlearn run --data knowundo``: the domain's Unlearn scope as the forget set and its
Retention scope as the retain set (the ``train`` lists, which the release unlearns on; its evaluation reads
``val``), as question-answer pairs (the request, with the release's instruction when ``--knowundo-direct-prompt``,
and its answer). ``--forget`` / ``--retain`` may name the domain's scopes as ``DOMAIN_SCOPE`` (``copyright_unlearn``,
``copyright_retention``); any other value is refused."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from unlearn_methods.data_sources import DataSource, register
from unlearn_methods.params import option
from unlearn_tasks.knowundo.data import load_pairs, request
from unlearn_tasks.knowundo.options import DOMAINS, HUB_ID, SCOPES

#: --forget values that mean the domain's Unlearn scope (``unlearn run``'s default split name)
DEFAULT_FORGET = ("forget10",)


def split_names(domain: str) -> list[str]:
    """The ``--forget`` / ``--retain`` names of a domain's scopes: ``copyright_unlearn``, ``copyright_retention``."""
    return [f"{domain}_{scope}" for scope in SCOPES]


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

    def check(self, cfg) -> None:
        names = split_names(cfg.knowundo_domain)
        forget = names[0] if cfg.forget in DEFAULT_FORGET else cfg.forget
        if forget not in names:
            raise ValueError(f"--forget {cfg.forget!r} is not a KnowUnDo split of --knowundo-domain "
                             f"{cfg.knowundo_domain}; use {' or '.join(names)} (default {names[0]}).")
        if cfg.retain is not None and (cfg.retain not in names or cfg.retain == forget):
            raise ValueError(f"--retain {cfg.retain!r} is not a KnowUnDo split of --knowundo-domain "
                             f"{cfg.knowundo_domain} other than the forget one; use "
                             f"{' or '.join(n for n in names if n != forget)}.")

    def resolve_splits(self, cfg) -> None:
        names = split_names(cfg.knowundo_domain)
        if cfg.forget in DEFAULT_FORGET:
            cfg.forget = names[0]
        cfg.retain = cfg.retain or next(n for n in names if n != cfg.forget)

    def load(self, cfg, data_dir: str | None) -> tuple[list[dict], list[dict]]:
        domain = cfg.knowundo_domain
        scope = {name: s for name, s in zip(split_names(domain), SCOPES)}
        forget = load_pairs(domain, scope[cfg.forget], "train", HUB_ID, data_dir)
        retain = load_pairs(domain, scope[cfg.retain], "train", HUB_ID, data_dir)
        return (qa_records(forget, domain, cfg.knowundo_direct_prompt),
                qa_records(retain, domain, cfg.knowundo_direct_prompt))

    eval_args = "--tasks knowundo_{knowundo_domain}"

    def eval_metadata(self, cfg) -> dict[str, Any]:
        return {}
