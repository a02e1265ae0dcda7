"""LUME's data source for ``unlearn run --data lume`` (SemEval-2025 Task 4): the forget and retain sets of the
selected sub-tasks, each item as the text the target model was fine-tuned to memorise, its ``input`` followed by its
``output`` (sentence-completion documents and question-answer pairs alike), trained as raw text (methods limited to
questions do not apply). The release's 1:1 forget / retain split is kept as it is: ``--forget`` is ``forget`` and
``--retain`` ``retain`` (any other value is refused); ``--lume-subtask`` and ``--lume-split`` choose the rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from unlearn_methods.data_sources import DataSource, register
from unlearn_methods.params import option
from unlearn_tasks.dataset_loader import DataError
from unlearn_tasks.lume.data import load_rows
from unlearn_tasks.lume.options import HUB_ID, SUBTASKS


def records(rows: list[dict], subtasks: list[str]) -> list[dict]:
    """``{"text": input + output}`` of the rows of ``subtasks`` (the release's ``Task1`` ...)."""
    return [{"text": r["input"] + r["output"]} for r in rows if str(r["task"]).strip() in subtasks]


def subtask_names(numbers: list[int]) -> list[str]:
    """``[1, 3]`` -> ``["Task1", "Task3"]`` (every sub-task when empty)."""
    return [f"Task{n}" for n in sorted(set(numbers))] if numbers else list(SUBTASKS)


@register
class Lume(DataSource):
    """LUME (SemEval-2025 Task 4): forget and retain sets of the selected sub-tasks as raw text (this module)."""

    name = "lume"
    help = "'lume' (SemEval-2025 Task 4's forget / retain sets as raw text: --lume-subtask N, --lume-split)"
    text = True
    eval_args = "--tasks lume --metadata '{lume_metadata}'"

    @dataclass
    class Options:
        lume_subtask: list[int] = option([], "A sub-task to unlearn (1 creative documents, 2 PII "
                                         "biographies, 3 real biographies); repeatable; default all three.",
                                         repeat=True, resume=True, metavar="N")
        lume_split: str = option("train", "The fold of the Hub layout to unlearn (a local "
                                 "forget.jsonl / retain.jsonl folder has one).", choices=("train", "validation"),
                                 resume=True)

    def dataset(self, data: str) -> str:
        return HUB_ID

    def check(self, cfg) -> None:
        bad = [n for n in cfg.lume_subtask if n not in (1, 2, 3)]
        if bad:
            raise ValueError(f"--lume-subtask must be 1, 2 or 3 (repeatable), got {bad[0]!r}.")
        if cfg.forget not in ("forget10", "forget"):  # forget10: unlearn run's default split name
            raise ValueError(f"--forget {cfg.forget!r}: LUME's forget set is 'forget' (leave --forget out); "
                             "--lume-subtask and --lume-split choose its rows.")
        if cfg.retain not in (None, "retain"):
            raise ValueError(f"--retain {cfg.retain!r}: LUME's retain set is 'retain' (leave --retain out); "
                             "--lume-subtask and --lume-split choose its rows.")

    def resolve_splits(self, cfg) -> None:
        cfg.forget = "forget"
        cfg.retain = "retain"

    def load(self, cfg, data_dir: str | None) -> tuple[list[dict], list[dict]]:
        wanted = subtask_names(cfg.lume_subtask)
        out = []
        for name in ("forget", "retain"):
            found = records(load_rows(name, HUB_ID, data_dir, cfg.lume_split), wanted)
            if not found:
                raise DataError(f"LUME {name} set: no rows of {', '.join(wanted)}.")
            out.append(found)
        return out[0], out[1]

    def training_set(self, run, tokenizer) -> Any:
        from unlearn_methods.forget_retain import TextForgetRetainDataset

        return TextForgetRetainDataset(run.forget, run.retain, tokenizer, seed=run.cfg.seed,
                                       max_length=run.cfg.max_length)

    def template_fields(self, cfg) -> dict[str, Any]:
        return {**super().template_fields(cfg), "lume_metadata": json.dumps(self.eval_metadata(cfg))}

    def eval_metadata(self, cfg) -> dict[str, Any]:
        return {"lume_split": cfg.lume_split}
