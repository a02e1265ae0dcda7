"""The switches of a CLEAR evaluation, read from the task's metadata (YAML ``metadata`` + ``--metadata``)."""

from __future__ import annotations

from dataclasses import dataclass

from unlearn_tasks.clear.documents import SETS
from unlearn_tasks.clear.splits import FORGET_SPLITS, HUB_ID
from unlearn_tasks.metadata import MetadataOptions, per_key
from unlearn_tasks.metrics.tofu import TRUTH_RATIO_MEANS
from unlearn_tasks.settings import param
from unlearn_tasks.tofu.options import ANSWER_SCORINGS, PARTS

MODES = ("default", "parity")


@dataclass
class ClearOptions(MetadataOptions):
    WHERE = "CLEAR task"

    forget_split: str = param("forget10", "the forget split (its retain split follows)", choices=FORGET_SPLITS)
    dataset_path: str = param(HUB_ID, "another Hub id in CLEAR's layout")
    data_dir: str | None = param(None, "a local copy of CLEAR in the Hub's layout")
    tofu_data_dir: str | None = param(None, "a local copy of TOFU for the text task (clear_forgetXX_text), whose "
                                      "people are TOFU's authors; data_dir belongs to the CLEAR copy")
    tofu_dataset_path: str | None = param(None, "another Hub id in TOFU's layout for the text task "
                                          "(default locuslab/TOFU)")
    reference: str | dict[str, str] | None = param(
        None, "the retain model's run (a results folder or file, or {forget split: path}): Forget Quality")
    mode: str = param(
        "default", "default: per-item truth ratios, every item, and the options of real_faces / real_world less the "
        "true answer as the perturbed answers; parity: the release's quirks (the perturbed loss pooled over the "
        "set, the first 300 items, the options as given)", choices=MODES)
    answer_scoring: str = param("all", "as for TOFU: all scores every answer token, tofu skips the first",
                                choices=ANSWER_SCORINGS)
    truth_ratio_mean: str = param("geometric", "as for TOFU: geometric (the code's) or arithmetic (the paper's)",
                                  choices=TRUTH_RATIO_MEANS)
    max_items_per_split: int | None = param(None, "keep the first N items of every set", ge=1)
    parts: list[str] = param(list(PARTS), "what to score: generation (ROUGE), likelihood (probabilities, truth "
                             "ratios)", choices=PARTS)
    sets: list[str] = param(list(SETS), "the image sets to evaluate", choices=SETS)
    seed: int = param(0, "the seed of the caption question drawn for each item (the release draws one of nine)")

    def reference_for_split(self) -> str | None:
        return per_key(self.reference, self.forget_split)
