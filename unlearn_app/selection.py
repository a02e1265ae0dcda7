"""``unlearn run --select RULE``: which evaluated step's weights become the output.

``RULE`` is ``EXPRESSION:max`` or ``EXPRESSION:min``, where ``EXPRESSION`` is one side of an ``unlearn ci`` check
(the same grammar, :mod:`unlearn_app.ci.checks`): a ``TASK/METRIC``, or arithmetic over them::

    tofu_forget10/forget_quality:max
    tofu_forget10/forget_prob:min
    abs(tofu_forget10/privleak):min
    tofu_forget10/model_utility - tofu_forget10/forget_prob:max
"""

from __future__ import annotations

from dataclasses import dataclass

from unlearn_app.ci.checks import CheckSyntaxError, expression_value, lookup_in, parse_expression, refs

MODES = ("max", "min")
EXAMPLE = "tofu_forget10/forget_quality:max"


class SelectionError(ValueError):
    """A ``--select`` rule that cannot be used; the message says what to write."""


@dataclass(frozen=True)
class Selection:
    """A parsed rule: ``score(metrics)`` is the expression's value, ``mode`` says whether the best is the largest."""

    text: str
    expression: object
    mode: str

    @property
    def tasks(self) -> list[str]:
        return list(dict.fromkeys(r.task for r in refs(self.expression)))

    def score(self, metrics: dict[str, dict[str, float]]) -> float:
        """The rule's value on ``{task: {metric: value}}``; a missing task or metric raises a LookupError naming
        what the evaluation produced."""
        return expression_value(self.expression, lookup_in(metrics, "the evaluation's results"))


def parse_select(text: str) -> Selection:
    """Parse ``--select``; :class:`SelectionError` says what is wrong and how to write it."""
    if not isinstance(text, str) or ":" not in text:
        raise SelectionError(f"--select {text!r}: write TASK/METRIC:max or TASK/METRIC:min, e.g. --select {EXAMPLE}.")
    expression, mode = text.rsplit(":", 1)
    if mode.strip().lower() not in MODES:
        raise SelectionError(f"--select {text!r}: after the colon write max or min (got {mode.strip()!r}), "
                             f"e.g. --select {EXAMPLE}.")
    try:
        node = parse_expression(expression)
    except CheckSyntaxError as e:
        raise SelectionError(f"--select {text!r}: {e}") from None
    return Selection(text.strip(), node, mode.strip().lower())

