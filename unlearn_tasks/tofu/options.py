"""The switches of a TOFU evaluation, read from the task's metadata (YAML ``metadata`` + ``--metadata``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from unlearn_tasks.classifier import chosen_classifier, option_checks
from unlearn_tasks.metadata import MetadataOptions, check_positive_int, per_key
from unlearn_tasks.metrics.tofu import TRUTH_RATIO_AGGREGATORS, TRUTH_RATIO_MEANS
from unlearn_tasks.tofu.splits import FORGET_SPLITS, HUB_ID

#: ``all``: score every answer token (lm-eval's convention; the default).
#: ``tofu``: skip the first answer token, as legacy TOFU and open-unlearning do with byte-level BPE tokenizers.
ANSWER_SCORINGS = ("all", "tofu")
#: ``lm_eval``: generate after ``Question: q\nAnswer:`` (lm-eval's convention: no trailing whitespace).
#: ``tofu``: generate after ``Question: q\nAnswer: `` (trailing space, TOFU's QA template), as open-unlearning does.
#: Default (None): ``tofu`` when ``answer_scoring`` is ``tofu``, else ``lm_eval``.
GENERATION_PROMPTS = ("lm_eval", "tofu")
PARTS = ("generation", "likelihood")
#: The sets with a truth ratio and open-unlearning's aggregation of each (its TOFU configs).
DEFAULT_AGGREGATORS = {"forget": "closer_to_1_better", "retain": "true_better", "ra": "true_better", "wf": "true_better"}


@dataclass
class TofuOptions(MetadataOptions):
    WHERE = "TOFU task"
    EXTRA_KEYS = frozenset({"version", "sets"})

    forget_split: str = "forget10"
    dataset_path: str = HUB_ID
    data_dir: str | None = None
    reference: str | dict[str, str] | None = None
    answer_scoring: str = "all"
    generation_prompt: str | None = None
    truth_ratio_mean: str = "geometric"
    truth_ratio_aggregator: str | dict[str, str] | None = None
    max_items_per_split: int | None = None
    parts: list[str] = field(default_factory=lambda: list(PARTS))
    mia_k: float = 0.4
    #: The GradNorm MIA (one backward pass per forget and holdout answer; hf backend only).
    mia_gradnorm: bool = False
    #: The reference-based MIA (``mia_reference_auc``), from the reference run's per-item losses. Unset (auto): on
    #: when the reference logs them, else left out with a warning saying how to produce them (a legacy TOFU log
    #: still gives Forget Quality); true: a reference without them is refused; false: never.
    mia_reference: bool | None = None
    #: Score the forget generations with a text classifier (open-unlearning's gibberish metric): true for its
    #: default classifier, or a local folder / Hub id of any sequence-classification model.
    gibberish: bool | str = False
    #: In the ``tofu`` mode with a chat template (``--apply_chat_template``): read and generate under
    #: open-unlearning's attention mask, which hides every position holding the pad token (SmolLM2's and
    #: Llama-3's end of turn), as its numbers are computed (``hf`` backend; default). false: the plain mask.
    ou_chat_mask: bool = True

    def complete(self, metadata: dict[str, Any]) -> None:
        if self.generation_prompt is None:
            self.generation_prompt = "tofu" if self.answer_scoring == "tofu" else "lm_eval"

    def validate(self) -> None:
        check_positive_int(self.max_items_per_split, "max_items_per_split", "TOFU task option")
        checks = [
            (isinstance(self.reference, (str, dict, type(None))), "reference must be a path or {split: path}"),
            (self.forget_split in FORGET_SPLITS, f"forget_split must be one of {FORGET_SPLITS}"),
            (self.answer_scoring in ANSWER_SCORINGS, f"answer_scoring must be one of {ANSWER_SCORINGS}"),
            (self.generation_prompt in (None, *GENERATION_PROMPTS), f"generation_prompt must be one of {GENERATION_PROMPTS}"),
            (self.truth_ratio_mean in TRUTH_RATIO_MEANS, f"truth_ratio_mean must be one of {TRUTH_RATIO_MEANS}"),
            (isinstance(self.parts, list) and bool(self.parts) and set(self.parts) <= set(PARTS), f"parts must be a non-empty subset of {PARTS}"),
            (self._aggregators_ok(), f"truth_ratio_aggregator must be one of {TRUTH_RATIO_AGGREGATORS} (the forget "
             f"set's) or {{set: aggregator}} for sets {tuple(DEFAULT_AGGREGATORS)}"),
            (isinstance(self.mia_gradnorm, bool), "mia_gradnorm must be true or false"),
            (isinstance(self.mia_reference, (bool, type(None))), "mia_reference must be true or false"),
            (isinstance(self.ou_chat_mask, bool), "ou_chat_mask must be true or false"),
            *option_checks(self.gibberish),
            (isinstance(self.mia_k, (int, float)) and not isinstance(self.mia_k, bool) and 0 < self.mia_k <= 1,
             "mia_k must be a number in (0, 1]"),
        ]
        self.require(checks)

    def _aggregators_ok(self) -> bool:
        given = self.truth_ratio_aggregator
        if given is None or given in TRUTH_RATIO_AGGREGATORS:
            return True
        return isinstance(given, dict) and all(k in DEFAULT_AGGREGATORS and v in TRUTH_RATIO_AGGREGATORS
                                               for k, v in given.items())

    def aggregators(self) -> dict[str, str]:
        """The truth-ratio aggregation of each set: open-unlearning's defaults, a string replacing the forget set's,
        or a mapping replacing the sets it names."""
        given = self.truth_ratio_aggregator
        if isinstance(given, str):
            given = {"forget": given}
        return {**DEFAULT_AGGREGATORS, **(given or {})}

    def gibberish_classifier(self) -> str | None:
        """The classifier of the gibberish metric, None when it is off."""
        return chosen_classifier(self.gibberish)

    def reference_for_split(self) -> str | None:
        return per_key(self.reference, self.forget_split)
