"""Refusal answers for IDK-style methods ("I don't know" fine-tuning, DPO toward refusals).

The list is this project's own phrasing; ``load_idk_answers(path)`` reads any other list, one answer per line
(e.g. TOFU's ``idontknow.jsonl``, where each line is a JSON string or plain text).
"""

from __future__ import annotations

from pathlib import Path

from unlearn_tasks.dataset_loader import read_json_lines

IDK_ANSWERS = [
    "I don't know the answer to that.",
    "I'm not sure about that.",
    "I have no information about that.",
    "That is something I cannot tell you.",
    "I'm afraid I don't have that information.",
    "I can't answer that question.",
    "I do not know.",
    "Sorry, I don't have an answer for that.",
    "I have no knowledge of that.",
    "That is beyond what I know.",
    "I am unable to answer that.",
    "I really couldn't say.",
    "I don't have any details on that.",
    "I'm not aware of that.",
    "No idea, I'm afraid.",
    "I cannot recall anything about that.",
    "I lack the information to answer.",
    "I'm not familiar with that.",
    "I have nothing to share on that topic.",
    "I'm unable to provide that information.",
]


def load_idk_answers(path: str | Path | None = None) -> list[str]:
    """The built-in refusals, or those in ``path`` (one per line; JSON strings or plain text)."""
    if path is None:
        return list(IDK_ANSWERS)
    answers = []
    for _, line, value in read_json_lines(path, plain_text=True):
        try:
            line = value if isinstance(value, str) else str(value.get("answer", line))
        except AttributeError:
            pass
        answers.append(line)
    if not answers:
        raise ValueError(f"{path} holds no refusal answers (expected one per line).")
    return answers
