"""The ReLU release's prompt strings, exactly (note the space before the first newline of the MCQA prompt).

No chat template is applied by the release; with lm-eval's ``--apply_chat_template`` the whole prompt becomes
the user turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from unlearn_tasks.tofu_formats.sampling import LETTERS

ODD_ONE_OUT_QUESTION = (
    "Choose the option that provides a correct fact (choose the correct option from the below options):"
)
MASK = "[MASK]"


def _lettered(options: Sequence[str]) -> str:
    return "".join(f"{LETTERS[i]}. {opt}\n" for i, opt in enumerate(options))


def mcqa_prompt(question: str, options: Sequence[str], context: str | None = None) -> str:
    """MCQA, analogy MCQA and (with ``context``) comprehension MCQA."""
    prefix = f"Context: {context}\n" if context is not None else ""
    return f"{prefix}Question: {question} \n{_lettered(options)}Answer:"


def odd_one_out_prompt(options: Sequence[str]) -> str:
    """Odd-one-out (the release's wording asks for the 'correct fact'; kept in both modes)."""
    return f"Question: {ODD_ONE_OUT_QUESTION}\n{_lettered(options)}Answer:"


def cloze_prompt(question: str, mask: str) -> str:
    """The question, then the answer sentence up to its blank (the blank is the scored continuation)."""
    return f"Question: {question}\nAnswer: {mask[: mask.index(MASK)]}"


def comprehension_qa_prompt(context: str, question: str) -> str:
    return f"Context: {context}\nQuestion: {question}\nAnswer:"


def qa_prompt(question: str) -> str:
    """Analogy QA (not in the release): TOFU's QA prompt around the analogy."""
    return f"Question: {question}\nAnswer:"
