"""TOFU's configs and which of them one evaluation of a forget size reads."""

from __future__ import annotations

from dataclasses import dataclass

HUB_ID = "locuslab/TOFU"
FORGET_SPLITS = ("forget01", "forget05", "forget10")


def retain_split(forget_split: str) -> str:
    """The retain split that complements a forget split in TOFU's naming: ``forget10`` -> ``retain90``."""
    size = forget_split.removeprefix("forget")
    if forget_split.startswith("forget") and size.isdigit() and 0 < int(size) < 100:
        return f"retain{100 - int(size)}"
    raise ValueError(f"Cannot derive the retain split of {forget_split!r} (TOFU names them forgetNN -> retain<100-NN>); "
                     "name the retain split explicitly.")


#: Every TOFU forget split and its retain split.
RETAIN_OF = {split: retain_split(split) for split in FORGET_SPLITS}
#: Number of forget items in the released TOFU data; legacy TOFU logs cap every split at 300 items.
FORGET_SIZES = {"forget01": 40, "forget05": 200, "forget10": 400}
LEGACY_CAP = 300

#: Evaluation sets: (short name used as metric prefix, config for a forget size, required columns).
QA = ("question", "answer")
PERTURBED = ("question", "answer", "paraphrased_answer", "perturbed_answer")
OPTIONS = ("question", "answer", "perturbed_answer")


@dataclass(frozen=True)
class EvalSet:
    name: str
    config: str
    columns: tuple[str, ...]
    generate: bool  # ROUGE on greedy generations
    base_answer: str  # the "correct" answer of the Truth Ratio: paraphrased for forget/retain, answer elsewhere


def eval_sets(forget_split: str) -> list[EvalSet]:
    """The sets one TOFU evaluation reads for ``forget_split`` (e.g. ``forget10``)."""
    if forget_split not in FORGET_SPLITS:
        raise ValueError(f"forget split must be one of {FORGET_SPLITS}, got {forget_split!r}")
    size = forget_split.removeprefix("forget")
    return [
        EvalSet("forget", f"{forget_split}_perturbed", PERTURBED, True, "paraphrased_answer"),
        EvalSet("retain", "retain_perturbed", PERTURBED, True, "paraphrased_answer"),
        EvalSet("ra", "real_authors_perturbed", OPTIONS, True, "answer"),
        EvalSet("wf", "world_facts_perturbed", OPTIONS, True, "answer"),
        EvalSet("holdout", f"holdout{size}", QA, False, "answer"),
    ]


def forget_split_of_size(n_items: int) -> list[str]:
    """Forget splits a reference log with ``n_items`` forget items can belong to (legacy logs cap at 300)."""
    return [s for s, n in FORGET_SIZES.items() if n == n_items or (n > LEGACY_CAP and n_items == LEGACY_CAP)]
