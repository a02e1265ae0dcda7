"""The empty-generation guard: when most greedy generations of a task are empty (the model emitted EOS at once),
generation metrics such as ROUGE are near 0 because of the prompt format, not because anything was forgotten.
Instruct models asked ``Question: ...\\nAnswer:`` without their chat template often do this."""

from __future__ import annotations

from collections.abc import Iterable

#: Warn when more than this share of a task's generations is empty.
EMPTY_SHARE = 0.5
CHAT_HINT = "Chat / instruct models: run with --apply_chat_template."


def is_empty(generation: str) -> bool:
    """A generation with no visible text."""
    return not generation.strip()


def empty_generation_warning(
    task: str, empty_flags: Iterable[bool], hint: str = "", chat_template_applied: bool = False
) -> str | None:
    """The warning to log and record when most generations are empty, else None. ``hint``: a task's own advice."""
    flags = list(empty_flags)
    n_empty = sum(flags)
    if not flags or n_empty <= EMPTY_SHARE * len(flags):
        return None
    advice = (
        "The chat template was applied: check that the model answers in it (its EOS and generation settings)."
        if chat_template_applied else CHAT_HINT
    )
    return (
        f"{task}: {n_empty} of {len(flags)} greedy generations are empty (the model stopped at once), so the "
        f"generation metrics (ROUGE) reflect the prompt format, not forgetting. {advice}{' ' + hint if hint else ''}"
    )
