"""The switches of a CLEAR evaluation, read from the task's metadata (YAML ``metadata`` + ``--metadata``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from unlearn_tasks.clear.documents import SETS
from unlearn_tasks.clear.splits import FORGET_SPLITS, HUB_ID
from unlearn_tasks.metadata import MetadataOptions, per_key
from unlearn_tasks.metrics.tofu import TRUTH_RATIO_MEANS
from unlearn_tasks.tofu.options import ANSWER_SCORINGS, PARTS

#: ``default``: per-item truth ratios, every item, options less the true answer.
#: ``parity``: the release's quirks: perturbed loss pooled over the set, first 300 items, options as given.
MODES = ("default", "parity")


@dataclass
class ClearOptions(MetadataOptions):
    WHERE = "CLEAR task"
    EXTRA_KEYS = frozenset({"version", "tofu_data_dir", "tofu_dataset_path"})

    forget_split: str = "forget10"
    dataset_path: str = HUB_ID
    data_dir: str | None = None
    reference: str | dict[str, str] | None = None
    mode: str = "default"
    answer_scoring: str = "all"
    truth_ratio_mean: str = "geometric"
    max_items_per_split: int | None = None
    parts: list[str] = field(default_factory=lambda: list(PARTS))
    sets: list[str] = field(default_factory=lambda: list(SETS))
    seed: int = 0

    def validate(self) -> None:
        checks = [
            (self.forget_split in FORGET_SPLITS, f"forget_split must be one of {FORGET_SPLITS}"),
            (self.mode in MODES, f"mode must be one of {MODES}"),
            (self.answer_scoring in ANSWER_SCORINGS, f"answer_scoring must be one of {ANSWER_SCORINGS}"),
            (self.truth_ratio_mean in TRUTH_RATIO_MEANS, f"truth_ratio_mean must be one of {TRUTH_RATIO_MEANS}"),
            (bool(self.parts) and set(self.parts) <= set(PARTS), f"parts must be a non-empty subset of {PARTS}"),
            (bool(self.sets) and set(self.sets) <= set(SETS), f"sets must be a non-empty subset of {SETS}"),
        ]
        self.require(checks)

    def reference_for_split(self) -> str | None:
        return per_key(self.reference, self.forget_split)
