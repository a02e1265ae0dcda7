"""MLLMU-Bench's Hub id, its configs (one folder of parquet shards each) and the forget percentages."""

from __future__ import annotations

HUB_ID = "MLLMMU/MLLMU-Bench"
#: Our forget split names and the release's ``--forget_ratio`` (percent of the 500 fictitious profiles).
FORGET_PERCENTS = {"forget05": 5, "forget10": 10, "forget15": 15}
FORGET_SPLITS = tuple(FORGET_PERCENTS)
#: Every fictitious profile (the few-shot examples are read from here), the real celebrities, and the test set
#: (the same people with new photos and paraphrased questions; its ``images`` column holds several photos).
FULL_SET, CELEBRITY_SET, TEST_SET = "Full_Set", "Retain_Set", "Test_Set"
#: The evaluation sets, in the order of the paper's tables.
SETS = ("forget", "test", "retain", "celebrity")


def forget_config(split: str) -> str:
    """``forget05`` -> ``forget_5`` (the Hub folder)."""
    return f"forget_{percent(split)}"


def retain_config(split: str) -> str:
    """``forget05`` -> ``retain_95`` (the other fictitious profiles)."""
    return f"retain_{100 - percent(split)}"


def percent(split: str) -> int:
    if split not in FORGET_PERCENTS:
        raise ValueError(f"forget_split must be one of {FORGET_SPLITS}, got {split!r}")
    return FORGET_PERCENTS[split]
