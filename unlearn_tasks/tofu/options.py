"""The switches of a TOFU evaluation, read from the task's metadata (YAML ``metadata`` + ``--metadata``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from unlearn_tasks.classifier import chosen_classifier, option_checks
from unlearn_tasks.metadata import MetadataOptions, check_positive_int, per_key
from unlearn_tasks.metrics.tofu import TRUTH_RATIO_AGGREGATORS, TRUTH_RATIO_MEANS
from unlearn_tasks.settings import param
from unlearn_tasks.tofu.splits import FORGET_SPLITS, HUB_ID

ANSWER_SCORINGS = ("all", "tofu")
GENERATION_PROMPTS = ("lm_eval", "tofu")
PARTS = ("generation", "likelihood")
#: The sets with a truth ratio and open-unlearning's aggregation of each (its TOFU configs).
DEFAULT_AGGREGATORS = {"forget": "closer_to_1_better", "retain": "true_better", "ra": "true_better", "wf": "true_better"}


@dataclass
class TofuOptions(MetadataOptions):
    WHERE = "TOFU task"
    EXTRA_KEYS = frozenset({"version", "sets"})

    forget_split: str = param("forget10", "the forget split (its holdout and retain sets follow)",
                              choices=FORGET_SPLITS)
    dataset_path: str = param(HUB_ID, "Hub id of a dataset in TOFU's schema")
    data_dir: str | None = param(
        None, "a local folder laid out like the Hub repository (one CONFIG.json JSON-lines file per config, what "
        "`hf download locuslab/TOFU --repo-type dataset --local-dir DIR` gives)")
    reference: str | dict[str, str] | None = param(
        None, "the retain model's run (a results folder or file, or {forget split: path}): Forget Quality and the "
        "reference MIA")
    answer_scoring: str = param(
        "all", "all: score every answer token (lm-eval's convention); tofu: open-unlearning's numbers (on the plain "
        "prompt the first answer token is skipped, as legacy TOFU and open-unlearning do with byte-level BPE "
        "tokenizers, and generation follows `Answer: `; with --apply_chat_template the chat tokens are scored: the "
        "answer, the template's end of turn, its EOS; in both Min-K% / Min-K%++ leave the last token out)",
        choices=ANSWER_SCORINGS)
    generation_prompt: str | None = param(
        None, "lm_eval: generate after `Question: q\\nAnswer:`; tofu: after `Question: q\\nAnswer: ` (trailing "
        "space, TOFU's template); default: tofu when answer_scoring is tofu, else lm_eval; ignored with "
        "--apply_chat_template", choices=GENERATION_PROMPTS)
    truth_ratio_mean: str = param(
        "geometric", "geometric: as the TOFU and open-unlearning code; arithmetic: the TOFU paper's formula",
        choices=TRUTH_RATIO_MEANS)
    truth_ratio_aggregator: str | dict[str, str] | None = param(
        None, "the forget set's truth-ratio aggregation, or {set: aggregation} for sets forget, retain, ra, wf "
        "(default open-unlearning's: closer_to_1_better for forget, true_better for the others)",
        choices=TRUTH_RATIO_AGGREGATORS)
    max_items_per_split: int | None = param(
        None, "keep the first N items of every set (300 reproduces legacy TOFU's ds_size cap)", ge=1)
    parts: list[str] = param(list(PARTS), "what to score: generation (ROUGE), likelihood (probabilities, truth "
                             "ratios, MIAs)", choices=PARTS)
    mia_k: float = param(0.4, "fraction of tokens for Min-K% and Min-K%++", gt=0, le=1)
    mia_gradnorm: bool = param(False, "the GradNorm MIA (mia_gradnorm_auc; one backward pass per forget and holdout "
                               "answer; hf backend only)")
    mia_reference: bool | None = param(
        None, "the reference MIA (mia_reference_auc) from the reference run's per-item losses; unset: reported when "
        "the reference logs them, else left out with a warning saying how to produce them; true: a reference "
        "without them is refused; false: never")
    gibberish: bool | str = param(
        False, "forget_gibberish: score the forget generations with a text classifier, true for open-unlearning's "
        "classifier or a local folder / Hub id of any sequence-classification model")
    ou_chat_mask: bool = param(
        True, "with answer_scoring tofu under --apply_chat_template: score and generate under open-unlearning's "
        "attention mask, which hides every position holding the pad token (SmolLM2's and Llama-3's end of turn), "
        "as its numbers are computed; false: the plain mask; hf only (vLLM takes no per-token mask)")

    def complete(self, metadata: dict[str, Any]) -> None:
        if self.generation_prompt is None:
            self.generation_prompt = "tofu" if self.answer_scoring == "tofu" else "lm_eval"

    def validate(self) -> None:
        check_positive_int(self.max_items_per_split, "max_items_per_split", "TOFU task option")
        checks = [  # the checks whose wording the declared fields do not give (the rest come from param(...))
            (self._aggregators_ok(), f"truth_ratio_aggregator must be one of {TRUTH_RATIO_AGGREGATORS} (the forget "
             f"set's) or {{set: aggregator}} for sets {tuple(DEFAULT_AGGREGATORS)}"),
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
