"""The check expressions of a CI suite, parsed by a small grammar of our own (never ``eval``).

Grammar (spaces are free except inside ``task/metric``)::

    check  := expr CMP expr                       CMP: >= <= > < == !=
    expr   := term (("+" | "-") term)*
    term   := unary (("*" | "/") unary)*
    unary  := "-" unary | atom
    atom   := NUMBER | "baseline" | TASK "/" METRIC | "abs" "(" expr ")" | "(" expr ")"

``TASK/METRIC`` is a metric of the evaluated model; ``baseline`` is the same metric of the baseline run (the
model before unlearning), for the one ``TASK/METRIC`` on the left side. Examples::

    tofu_forget10/forget_quality >= 0.05
    tofu_forget10/model_utility >= 0.95 * baseline
    abs(tofu_forget10/privleak) <= 5
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass, field

COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt, "==": operator.eq, "!=": operator.ne,
}
#: Deepest nesting of parentheses, ``abs(...)`` and unary minus a check may use (a deeper one is refused).
MAX_DEPTH = 32
#: Longest check text accepted.
MAX_LENGTH = 2000
_TOKEN = re.compile(
    r"\s*(?:(?P<ref>[A-Za-z_][\w.-]*/[A-Za-z_]\w*)|(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<name>[A-Za-z_]\w*)|(?P<op>>=|<=|==|!=|[<>+\-*/()]))"
)


class CheckSyntaxError(ValueError):
    """A check that does not parse; the message shows where and what is expected."""


# --------------------------------------------------------------------------- syntax tree
@dataclass(frozen=True)
class Num:
    value: float


@dataclass(frozen=True)
class Ref:
    task: str
    metric: str


@dataclass(frozen=True)
class Baseline:
    pass


@dataclass(frozen=True)
class Unary:
    op: str  # "-" or "abs"
    arg: object


@dataclass(frozen=True)
class Binary:
    op: str
    left: object
    right: object


def refs(node: object) -> list[Ref]:
    """The ``TASK/METRIC`` references in a tree, in order."""
    if isinstance(node, Ref):
        return [node]
    if isinstance(node, Unary):
        return refs(node.arg)
    if isinstance(node, Binary):
        return refs(node.left) + refs(node.right)
    return []


def uses_baseline(node: object) -> bool:
    if isinstance(node, Baseline):
        return True
    if isinstance(node, Unary):
        return uses_baseline(node.arg)
    if isinstance(node, Binary):
        return uses_baseline(node.left) or uses_baseline(node.right)
    return False


# --------------------------------------------------------------------------- parser
class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.depth = 0
        if len(text) > MAX_LENGTH:
            raise CheckSyntaxError(f"a check of {len(text)} characters is longer than the limit of {MAX_LENGTH}")
        self.tokens: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(text):
            if text[pos:].strip() == "":
                break
            m = _TOKEN.match(text, pos)
            if not m:
                at = len(text) - len(text[pos:].lstrip())
                self.fail(at, f"unexpected character {text[at]!r}")
            kind = m.lastgroup or ""
            self.tokens.append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
        self.i = 0

    def fail(self, at: int, what: str) -> None:
        raise CheckSyntaxError(f"{what} at column {at + 1}:\n    {self.text}\n    {' ' * at}^")

    def peek(self) -> tuple[str, str, int] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> tuple[str, str, int]:
        tok = self.peek()
        if tok is None:
            self.fail(len(self.text), "the check ends too early (a number, TASK/METRIC or baseline expected)")
        self.i += 1
        return tok  # type: ignore[return-value]

    def check(self) -> tuple[object, str, object]:
        left = self.expr()
        tok = self.peek()
        if tok is None or tok[1] not in COMPARISONS:
            self.fail(tok[2] if tok else len(self.text), "a comparison (>=, <=, >, <, ==, !=) expected")
        op = tok[1]
        self.i += 1
        right = self.expr()
        tok = self.peek()
        if tok is not None:
            self.fail(tok[2], f"unexpected {tok[1]!r} after the check")
        return left, op, right

    def expr(self) -> object:
        node = self.term()
        while (tok := self.peek()) and tok[1] in "+-" and tok[0] == "op":
            self.i += 1
            node = Binary(tok[1], node, self.term())
        return node

    def term(self) -> object:
        node = self.unary()
        while (tok := self.peek()) and tok[1] in ("*", "/"):
            self.i += 1
            node = Binary(tok[1], node, self.unary())
        return node

    def unary(self) -> object:
        tok = self.peek()
        self.depth += 1
        if self.depth > MAX_DEPTH:
            self.fail(tok[2] if tok else len(self.text), f"nested deeper than {MAX_DEPTH} levels")
        try:
            if tok and tok[1] == "-":
                self.i += 1
                return Unary("-", self.unary())
            return self.atom()
        finally:
            self.depth -= 1

    def atom(self) -> object:
        kind, value, at = self.take()
        if kind == "num":
            return Num(float(value))
        if kind == "ref":
            task, metric = value.split("/")
            return Ref(task, metric)
        if kind == "name" and value == "baseline":
            return Baseline()
        if kind == "name" and value == "abs":
            self.expect("(")
            node = self.expr()
            self.expect(")")
            return Unary("abs", node)
        if value == "(":
            node = self.expr()
            self.expect(")")
            return node
        if kind == "name":
            self.fail(at, f"unknown name {value!r} (write TASK/METRIC, a number, baseline or abs(...))")
        self.fail(at, f"unexpected {value!r} (a number, TASK/METRIC, baseline or abs(...) expected)")
        raise AssertionError  # unreachable

    def expect(self, symbol: str) -> None:
        tok = self.peek()
        if tok is None or tok[1] != symbol:
            self.fail(tok[2] if tok else len(self.text), f"{symbol!r} expected")
        self.i += 1


# --------------------------------------------------------------------------- checks
@dataclass
class Check:
    """One parsed check. ``subject`` is the left side's metric (what ``baseline`` refers to)."""

    text: str
    left: object
    op: str
    right: object
    line: int | None = None
    subject: Ref | None = field(default=None)

    @property
    def refs(self) -> list[Ref]:
        return refs(self.left) + refs(self.right)

    @property
    def name(self) -> str:
        return self.text


def parse_check(text: str, line: int | None = None) -> Check:
    """Parse one check; :class:`CheckSyntaxError` says where it went wrong."""
    if not isinstance(text, str) or not text.strip():
        raise CheckSyntaxError("a check must be a non-empty string such as 'tofu_forget10/forget_quality >= 0.05'")
    parser = _Parser(text.strip())
    left, op, right = parser.check()
    left_refs = refs(left)
    if not left_refs and not refs(right):
        raise CheckSyntaxError(f"{text!r} names no TASK/METRIC, so it checks nothing")
    subject = left_refs[0] if len(left_refs) == 1 else None
    if (uses_baseline(left) or uses_baseline(right)) and subject is None:
        raise CheckSyntaxError(f"{text!r} uses baseline, which needs exactly one TASK/METRIC on the left side")
    return Check(text.strip(), left, op, right, line, subject)


def parse_expression(text: str) -> object:
    """Parse one side of a check (arithmetic over numbers and ``TASK/METRIC``, no comparison, no ``baseline``);
    :class:`CheckSyntaxError` says where it went wrong."""
    if not isinstance(text, str) or not text.strip():
        raise CheckSyntaxError("an expression must be a non-empty string such as 'tofu_forget10/forget_quality'")
    parser = _Parser(text.strip())
    node = parser.expr()
    tok = parser.peek()
    if tok is not None:
        parser.fail(tok[2], f"unexpected {tok[1]!r} after the expression")
    if uses_baseline(node):
        raise CheckSyntaxError(f"{text!r}: baseline has no meaning here (no baseline run)")
    if not refs(node):
        raise CheckSyntaxError(f"{text!r} names no TASK/METRIC")
    return node


def expression_value(node: object, current: Lookup) -> float:
    """The value of a tree from :func:`parse_expression` (``current`` as for :func:`evaluate`)."""
    return _value(node, current, None, None)


@dataclass
class Outcome:
    """A check evaluated: ``value`` (left side), ``bound`` (right side), pass/fail and a sentence."""

    check: Check
    passed: bool
    value: float
    bound: float
    message: str
    #: ``TASK/METRIC`` the check read that are a run's stored values, not recomputed (open-unlearning folders).
    not_recomputed: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        out = {"check": self.check.text, "passed": self.passed, "value": _finite(self.value),
               "bound": _finite(self.bound), "op": self.check.op, "message": self.message, "line": self.check.line}
        if self.not_recomputed:
            out["not_recomputed"] = self.not_recomputed
        return out


def _finite(x: float) -> float | None:
    return x if math.isfinite(x) else None


class MissingValue(LookupError):
    """A metric a check needs is not in the results (or the baseline)."""


class UnusableValue(LookupError):
    """A metric a check needs is in the results but is no finite number (``true``, a string, null, infinity, or a
    value that could not be recomputed); the check fails, saying why."""


Lookup = Callable[[str, str], float]


def _value(node: object, current: Lookup, baseline: Lookup | None, subject: Ref | None) -> float:
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Ref):
        return current(node.task, node.metric)
    if isinstance(node, Baseline):
        if baseline is None:
            raise MissingValue("the check uses baseline but the suite names no baseline run (baseline: DIR)")
        assert subject is not None
        return baseline(subject.task, subject.metric)
    if isinstance(node, Unary):
        x = _value(node.arg, current, baseline, subject)
        return -x if node.op == "-" else abs(x)
    if isinstance(node, Binary):
        a = _value(node.left, current, baseline, subject)
        b = _value(node.right, current, baseline, subject)
        if node.op == "+":
            return a + b
        if node.op == "-":
            return a - b
        if node.op == "*":
            return a * b
        if b == 0:
            raise DivisionByZero(f"division by zero: {_show(node.right)} is 0")
        return a / b
    raise TypeError(node)


class DivisionByZero(ArithmeticError):
    """A check divides by a value that is 0 (it fails, saying so)."""


def _show(node: object) -> str:
    """A tree back as text, for messages."""
    if isinstance(node, Num):
        return f"{node.value:g}"
    if isinstance(node, Ref):
        return f"{node.task}/{node.metric}"
    if isinstance(node, Baseline):
        return "baseline"
    if isinstance(node, Unary):
        return f"-{_show(node.arg)}" if node.op == "-" else f"abs({_show(node.arg)})"
    if isinstance(node, Binary):
        return f"({_show(node.left)} {node.op} {_show(node.right)})"
    return "?"


def evaluate(check: Check, current: Lookup, baseline: Lookup | None = None) -> Outcome:
    """Evaluate ``check``; a NaN on either side fails it (the metric was not computed), and so does a division by
    zero (named as such)."""
    try:
        value = _value(check.left, current, baseline, check.subject)
        bound = _value(check.right, current, baseline, check.subject)
    except (DivisionByZero, UnusableValue) as e:
        return Outcome(check, False, math.nan, math.nan, f"FAIL {check.text}: {e}")
    if math.isnan(value) or math.isnan(bound):
        side = "value" if math.isnan(value) else "bound"
        return Outcome(check, False, value, bound, f"FAIL {check.text}: the {side} is NaN (not computed: "
                       "the results' warnings say why; Forget Quality, PrivLeak and DUSK's privleak need a "
                       "reference run)")
    passed = COMPARISONS[check.op](value, bound)
    verdict = "pass" if passed else "FAIL"
    return Outcome(check, passed, value, bound, f"{verdict} {check.text}: value {value:.4g} {check.op} bound {bound:.4g}"
                   + ("" if passed else " is false"))


def lookup_in(results: dict[str, dict[str, float]], what: str = "results",
              unusable: dict[tuple[str, str], str] | None = None) -> Lookup:
    """A :data:`Lookup` over ``{task: {metric: value}}`` that raises :class:`MissingValue` naming what is absent, and
    :class:`UnusableValue` with the reason for the ``(task, metric)`` keys of ``unusable``."""

    def get(task: str, metric: str) -> float:
        if unusable and (task, metric) in unusable:
            raise UnusableValue(unusable[task, metric])
        if task not in results:
            raise MissingValue(f"{what} hold no task {task!r} (tasks: {sorted(results)})")
        value = results[task].get(metric)
        if value is None:
            if metric in results[task]:
                return math.nan
            raise MissingValue(f"{what} hold no metric {metric!r} for {task} (metrics: {sorted(results[task])})")
        return float(value)

    return get
