"""``unlearn run --select RULE``: which evaluated step's weights become the output.

``RULE`` is ``EXPRESSION:max`` or ``EXPRESSION:min``, where ``EXPRESSION`` is one side of an ``unlearn ci`` check
(the same grammar, :mod:`unlearn_app.ci.checks`): a ``TASK/METRIC``, or arithmetic over them::

    tofu_forget10/forget_quality:max
    tofu_forget10/forget_prob:min
    abs(tofu_forget10/privleak):min
    tofu_forget10/model_utility - tofu_forget10/forget_prob:max

Conditions (``--select-if``, repeatable) are whole ``unlearn ci`` checks a step must pass to be chosen;
``baseline`` in them is the same metric at step 0 (the model before unlearning)::

    tofu_forget10/model_utility >= 0.9 * baseline
"""

from __future__ import annotations

from dataclasses import dataclass

from unlearn_app.ci.checks import (
    Check,
    CheckSyntaxError,
    evaluate,
    expression_value,
    lookup_in,
    parse_check,
    parse_expression,
    refs,
)

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
    conditions: tuple[Check, ...] = ()

    @property
    def tasks(self) -> list[str]:
        found = refs(self.expression) + [r for c in self.conditions for r in c.refs]
        return list(dict.fromkeys(r.task for r in found))

    def ineligible(self, metrics: dict[str, dict[str, float]], start: dict[str, dict[str, float]]) -> str | None:
        """Why a step with ``metrics`` may not be chosen (the ``--select-if`` checks it fails, ``baseline`` read
        from ``start``, the step-0 metrics), or None when it may."""
        failed = [o.message for c in self.conditions
                  if not (o := evaluate(c, lookup_in(metrics, "the evaluation's results"),
                                        lookup_in(start, "the step-0 evaluation"))).passed]
        return "; ".join(failed) or None

    def score(self, metrics: dict[str, dict[str, float]]) -> float:
        """The rule's value on ``{task: {metric: value}}``; a missing task or metric raises a LookupError naming
        what the evaluation produced."""
        return expression_value(self.expression, lookup_in(metrics, "the evaluation's results"))


def parse_select(text: str, conditions: list[str] | tuple[str, ...] = ()) -> Selection:
    """Parse ``--select`` (and its ``--select-if`` checks); :class:`SelectionError` says what is wrong and how to
    write it."""
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
    checks = []
    for condition in conditions:
        try:
            checks.append(parse_check(condition))
        except CheckSyntaxError as e:
            raise SelectionError(f"--select-if {condition!r}: {e}") from None
    return Selection(text.strip(), node, mode.strip().lower(), tuple(checks))

