"""The catalogue of ReLU formats, splits and task names (no heavy imports: reports and the YAML writer use it).

Task names:
- ``tofu_<format>[_<n>opt]_<split>``: one split, one score (e.g. ``tofu_mcqa_forget01``, ``tofu_mcqa_3opt_retain90``);
- ``tofu_<format>[_<n>opt]``: forget10 and retain90 in one task, reporting ``forget_<metric>``, ``retain_<metric>``
  and ``forget_retain_gap`` (e.g. ``tofu_mcqa`` = 4 options).
The option suffix is left out for a format's default option count (4).
"""

from __future__ import annotations

from dataclasses import dataclass

from unlearn_tasks.tofu.splits import FORGET_SPLITS, RETAIN_OF, retain_split

HUB_ID = "Exploration-Lab/ReLU"
SPLITS = (*FORGET_SPLITS, *RETAIN_OF.values())
#: The forget split of the short-named tasks (its retain split comes from :data:`RETAIN_OF`).
DEFAULT_PAIR = "forget10"
MODES = ("default", "parity")
GAP = "forget_retain_gap"


@dataclass(frozen=True)
class Format:
    """One ReLU format as lm-eval tasks."""

    name: str  # task-name part, e.g. "analogy_mcqa"
    config: str  # Hub config, e.g. "analogy"
    family: str  # "mc" (letter choice), "cloze" (blank probability) or "generation"
    metric: str  # per-split metric name
    label: str  # human name for reports
    options: tuple[int, ...] = ()  # option counts offered; the first is the default
    splits: tuple[str, ...] = SPLITS


FORMATS: dict[str, Format] = {
    f.name: f
    for f in (
        Format("mcqa", "mcqa", "mc", "acc", "MCQA", (4, 3, 2)),
        Format("cloze", "cloze", "cloze", "prob", "Cloze"),
        Format("analogy_mcqa", "analogy", "mc", "acc", "Analogy MCQA", (4, 3, 2)),
        Format("analogy_qa", "analogy", "generation", "rougeL_recall", "Analogy QA"),
        Format("odd_one_out", "odd-one-out", "mc", "acc", "Odd-one-out", (4, 3, 2)),
        Format("comprehension_qa", "comprehension", "generation", "rouge_f1", "Comprehension QA", (),
               SPLITS + ("full",)),
        Format("comprehension_mcqa", "comprehension", "mc", "acc", "Comprehension MCQA", (4, 3, 2), SPLITS + ("full",)),
    )
}

METRIC_LABELS = {
    "acc": "accuracy",
    "prob": "probability",
    "rougeL_recall": "ROUGE-L recall",
    "rouge_f1": "ROUGE F1 (mean of 1/2/L)",
}


def retain_of(forget_split: str) -> str:
    """The retain split that complements ``forget_split`` (forget05 -> retain95)."""
    if forget_split not in RETAIN_OF:
        raise ValueError(f"forget split must be one of {FORGET_SPLITS}, got {forget_split!r}")
    return retain_split(forget_split)


def task_name(fmt: Format, n_options: int | None = None, split: str | None = None) -> str:
    """``tofu_<format>[_<n>opt][_<split>]``; no option suffix for the default count."""
    name = f"tofu_{fmt.name}"
    if fmt.options and n_options is not None and n_options != fmt.options[0]:
        name += f"_{n_options}opt"
    return f"{name}_{split}" if split else name


def option_counts(fmt: Format) -> tuple[int | None, ...]:
    return fmt.options or (None,)


def split_tasks(fmt: Format) -> list[str]:
    """Every one-split task of a format (all option counts)."""
    return [task_name(fmt, n, s) for n in option_counts(fmt) for s in fmt.splits]


def pair_tasks(fmt: Format) -> list[str]:
    """The forget + retain tasks of a format, one per option count (default count first)."""
    return [task_name(fmt, n) for n in option_counts(fmt)]


def default_tasks() -> list[str]:
    """One forget10 + retain90 task per format with 4 options: the per-format table (group ``tofu_formats``)."""
    return [task_name(f) for f in FORMATS.values()]


def pair_metric_names(fmt: Format) -> list[str]:
    return [f"forget_{fmt.metric}", f"retain_{fmt.metric}", GAP]


def all_task_names() -> list[str]:
    """Every task this package defines for ReLU (groups excluded)."""
    return [t for f in FORMATS.values() for t in pair_tasks(f) + split_tasks(f)]


def group_names() -> list[str]:
    return ["tofu_formats", "tofu_formats_all", *(f"tofu_{f.name}_all" for f in FORMATS.values())]
