"""DUSK's data source for ``unlearn run --data dusk``: the release's forget corpus (the chronological style of the
120 professors' documents) and retain corpus (the four other styles), as raw text.

The release trains on each style's file as one text cut into token windows; each style here is one text too (the
professors' documents in order, separated as in the release's files), cut into ``--max-length`` windows by the
raw-text training set. ``--forget`` may name another style (``retain_interview``, ...); the retain corpus is then
the other four (or the styles ``--retain`` lists, comma-separated).
"""

from __future__ import annotations

from typing import Any

from unlearn_methods.data_sources import DataSource, register
from unlearn_tasks.dusk.data import FORGET_SPLIT, RETAIN_SPLITS
from unlearn_tasks.dusk.options import HUB_ID

STYLES = (FORGET_SPLIT, *RETAIN_SPLITS)
#: forget values that mean the release's forget style (TOFU's default split name, and the plain word)
DEFAULT_FORGET = ("forget10", "forget")


def styles(value: str) -> list[str]:
    return [s.strip() for s in value.split(",") if s.strip()]


@register
class Dusk(DataSource):
    """DUSK (fictional professors, one forget style and four retain styles sharing knowledge): raw text, no questions."""

    name = "dusk"
    help = ("'dusk' (AI-ISL/DUSK raw text: forget the chronological style, retain the four others; --forget / --retain "
            "may name other styles; methods limited to questions in `unlearn methods` do not apply)")
    text = True
    eval_args = "--tasks dusk"

    def dataset(self, data: str) -> str:
        return HUB_ID

    def check(self, cfg) -> None:
        forget = FORGET_SPLIT if cfg.forget in DEFAULT_FORGET else cfg.forget
        if forget not in STYLES:
            raise ValueError(f"--forget {cfg.forget!r} is not a DUSK style; use one of {', '.join(STYLES)}.")
        bad = [s for s in styles(cfg.retain or "") if s not in STYLES or s == forget]
        if bad:
            raise ValueError(f"--retain {cfg.retain!r}: {', '.join(bad)} is not a DUSK style other than the forget "
                             f"one; list styles of {', '.join(STYLES)}, comma-separated.")

    def resolve_splits(self, cfg) -> None:
        if cfg.forget in DEFAULT_FORGET:
            cfg.forget = FORGET_SPLIT
        cfg.retain = cfg.retain or ",".join(s for s in STYLES if s != cfg.forget)

    def load(self, cfg, data_dir: str | None) -> tuple[list[dict], list[dict]]:
        from unlearn_tasks.dusk.data import raw_text

        return ([{"text": raw_text(HUB_ID, cfg.forget, data_dir)}],
                [{"text": raw_text(HUB_ID, s, data_dir)} for s in styles(cfg.retain)])

    def training_set(self, run, tokenizer) -> Any:
        from unlearn_methods.forget_retain import TextForgetRetainDataset

        return TextForgetRetainDataset(run.forget, run.retain, tokenizer, seed=run.cfg.seed,
                                       max_length=run.cfg.max_length)
