"""The switches of an MLLMU-Bench evaluation, read from the task's metadata (YAML ``metadata`` + ``--metadata``)."""

from __future__ import annotations

from dataclasses import dataclass

from unlearn_tasks.metadata import MetadataOptions
from unlearn_tasks.mllmu.documents import MODALITIES, MODES, PARTS
from unlearn_tasks.mllmu.splits import FORGET_SPLITS, HUB_ID, SETS
from unlearn_tasks.settings import param


@dataclass
class MllmuOptions(MetadataOptions):
    WHERE = "MLLMU-Bench task"

    forget_split: str = param("forget05", "the forget percentage: forget05, forget10 or forget15 of the fictitious "
                              "profiles (retain: the others)", choices=FORGET_SPLITS)
    modality: str = param("image", "image: the questions asked with the person's photo (image+text); text: the "
                          "text-only questions", choices=MODALITIES)
    dataset_path: str = param(HUB_ID, "another Hub id in MLLMU-Bench's layout")
    data_dir: str | None = param(None, "a local copy of MLLMU-Bench in the Hub's layout (Full_Set/, forget_5/, ...)")
    mode: str = param(
        "release", "release: the release's quirks (few-shot people drawn from the evaluated set and left unscored, "
        "accuracy in percent, 0 for an empty set); clean: few-shot people from no forget split, accuracy as a "
        "fraction, NaN for an empty set", choices=MODES)
    parts: list[str] = param(list(PARTS), "the evaluations: classification (multiple choice), cloze (fill in the "
                             "blank), generation (ROUGE, BLEU)", choices=PARTS)
    sets: list[str] = param(list(SETS), "the sets to evaluate", choices=SETS)
    classification_shots: int = param(1, "people whose questions are the classification few-shot examples (the "
                                      "release: 1 for LLaVA and Idefics2)", ge=0)
    cloze_shots: int = param(2, "people whose questions are the cloze few-shot examples (the release: 2 for LLaVA, "
                             "1 for Idefics2)", ge=0)
    seed: int = param(0, "the seed of the few-shot draw and of the test set's photo (the release does not seed)")
    max_items_per_split: int | None = param(None, "keep the first N questions of every set and evaluation", ge=1)
