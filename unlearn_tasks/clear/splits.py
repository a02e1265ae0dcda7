"""CLEAR's Hub id, forget sizes and the configs each evaluation set is read from."""

from __future__ import annotations

HUB_ID = "therem/CLEAR"
#: Share of the ~200 people in each forget set (the rest form the matching retain set).
FORGET_FRACTIONS = {"forget01": 0.01, "forget05": 0.05, "forget10": 0.10}
FORGET_SPLITS = tuple(FORGET_FRACTIONS)
#: The release caps every evaluation set at its first 300 items (``ds_size: 300``); parity mode does too.
RELEASE_CAP = 300


def retain_of(forget: str) -> str:
    """``forget10`` -> ``retain90`` (the matching retain set, also the gold model's training set)."""
    if forget not in FORGET_FRACTIONS:
        raise ValueError(f"forget split must be one of {FORGET_SPLITS}, got {forget!r}")
    return f"retain{100 - int(forget[-2:]):02d}"
