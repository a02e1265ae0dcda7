"""The 48 Eval-DU family deduction rules and the gender conditions that guard every derived relation.

Notation: ``rel(x,y)`` means "person y is person x's <rel>" (the same reading as a knowledge-base edge
``(source=x, target=y, relation=rel)``); a rule is ``body_1 & body_2 -> head`` over variables 0, 1, 2.

The upstream release spells "nephew" as ``newphe`` in two rule bodies (rules 15 and 18), so those two rules
never fire on the release data (no fact has relation ``newphe``). :data:`FAMILY_RULE_SPECS` keeps that
spelling, because the shipped candidate minimal sets were computed with it; pass ``fix_typos=True`` to
:func:`family_rules` for the corrected rule set.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

Atom = tuple[int, str, int]

FAMILY_RULE_SPECS: tuple[str, ...] = (
    "wife(0,1) -> husband(1,0)",
    "child(1,2) & child(0,2) -> husband(0,1)",
    "father(0,2) & mother(0,1) -> husband(1,2)",
    "husband(0,1) -> wife(1,0)",
    "child(1,2) & child(0,2) -> wife(0,1)",
    "father(0,2) & mother(0,1) -> wife(1,2)",
    "uncle(1,0) -> nephew(0,1)",
    "aunt(1,0) -> nephew(0,1)",
    "child(0,2) & brother(0,1) -> nephew(1,2)",
    "child(0,2) & sister(0,1) -> nephew(1,2)",
    "uncle(1,0) -> niece(0,1)",
    "aunt(1,0) -> niece(0,1)",
    "child(0,2) & brother(0,1) -> niece(1,2)",
    "child(0,2) & sister(0,1) -> niece(1,2)",
    "niece(0,1) -> uncle(1,0)",
    "newphe(0,1) -> uncle(1,0)",
    "child(0,2) & brother(0,1) -> uncle(2,1)",
    "niece(0,1) -> aunt(1,0)",
    "newphe(0,1) -> aunt(1,0)",
    "child(0,2) & sister(0,1) -> aunt(2,1)",
    "brother(1,0) -> brother(0,1)",
    "sister(1,0) -> brother(0,1)",
    "child(0,1) & child(0,2) -> brother(2,1)",
    "mother(2,1) & mother(0,1) -> brother(0,2)",
    "father(2,1) & father(0,1) -> brother(0,2)",
    "brother(1,0) -> sister(0,1)",
    "sister(1,0) -> sister(0,1)",
    "child(0,1) & child(0,2) -> sister(2,1)",
    "mother(2,1) & mother(0,1) -> sister(0,2)",
    "father(2,1) & father(0,1) -> sister(0,2)",
    "child(0,1) -> mother(1,0)",
    "father(0,2) & wife(2,1) -> mother(0,1)",
    "brother(2,0) & mother(2,1) -> mother(0,1)",
    "sister(2,0) & mother(2,1) -> mother(0,1)",
    "child(0,1) -> father(1,0)",
    "mother(0,2) & husband(2,1) -> father(0,1)",
    "brother(2,0) & father(2,1) -> father(0,1)",
    "sister(2,0) & father(2,1) -> father(0,1)",
    "mother(0,1) -> child(1,0)",
    "mother(0,1) & sister(2,0) -> child(1,2)",
    "wife(0,1) & father(2,0) -> child(1,2)",
    "mother(0,1) & brother(2,0) -> child(1,2)",
    "father(0,1) -> child(1,0)",
    "father(0,1) & sister(2,0) -> child(1,2)",
    "father(0,1) & brother(2,0) -> child(1,2)",
    "child(2,1) & sister(0,1) -> child(2,0)",
    "child(2,1) & brother(0,1) -> child(2,0)",
    "husband(0,1) & mother(2,0) -> child(1,2)",
)

#: relation -> (required gender of the source, required gender of the target); None = unconstrained.
#: Checked only when a rule derives a new fact, never on the facts of the knowledge base.
FAMILY_RELATION_CONDITIONS: dict[str, tuple[str | None, str | None]] = {
    "husband": ("female", "male"),
    "wife": ("male", "female"),
    "father": (None, "male"),
    "uncle": (None, "male"),
    "brother": (None, "male"),
    "nephew": (None, "male"),
    "mother": (None, "female"),
    "aunt": (None, "female"),
    "sister": (None, "female"),
    "niece": (None, "female"),
    "child": (None, None),
}

FAMILY_RELATIONS: tuple[str, ...] = tuple(FAMILY_RELATION_CONDITIONS)
_TYPO_FIXES = {"newphe": "nephew"}
_ATOM = re.compile(r"^\s*([A-Za-z_]+)\((\d+),(\d+)\)\s*$")


@dataclass(frozen=True)
class Rule:
    """A Horn rule ``AND(body) -> head`` over integer variables; atoms are ``(x, relation, y)``."""

    body: tuple[Atom, ...]
    head: Atom
    num_vars: int
    rule_id: int = -1

    def __post_init__(self) -> None:
        body_vars = {v for x, _, y in self.body for v in (x, y)}
        if not {self.head[0], self.head[2]} <= body_vars:
            raise ValueError(f"rule {self.rule_id}: head variables must appear in the body: {self}")


def parse_atom(text: str) -> Atom:
    """Parse ``rel(x,y)`` into ``(x, rel, y)``."""
    match = _ATOM.match(text)
    if not match:
        raise ValueError(f"cannot parse rule atom {text!r}; expected the form rel(x,y), e.g. wife(0,1)")
    return int(match.group(2)), match.group(1), int(match.group(3))


def parse_rule(spec: str, rule_id: int = -1) -> Rule:
    """Parse ``"a(0,1) & b(1,2) -> c(0,2)"`` into a :class:`Rule`."""
    if "->" not in spec:
        raise ValueError(f"rule {rule_id}: {spec!r} has no '->'")
    left, right = spec.split("->")
    body = tuple(parse_atom(part) for part in left.split("&"))
    head = parse_atom(right)
    num_vars = 1 + max(v for x, _, y in (*body, head) for v in (x, y))
    return Rule(body=body, head=head, num_vars=num_vars, rule_id=rule_id)


def family_rules(fix_typos: bool = False) -> list[Rule]:
    """The 48 Eval-DU rules, as released (``fix_typos=False``) or with ``newphe`` read as ``nephew``."""
    rules = [parse_rule(spec, i) for i, spec in enumerate(FAMILY_RULE_SPECS)]
    return [fix_rule_typos(rule) for rule in rules] if fix_typos else rules


def fix_rule_typos(rule: Rule) -> Rule:
    """Return ``rule`` with misspelled relation names (``newphe``) corrected."""
    fix = lambda atom: (atom[0], _TYPO_FIXES.get(atom[1], atom[1]), atom[2])  # noqa: E731
    return Rule(tuple(fix(a) for a in rule.body), fix(rule.head), rule.num_vars, rule.rule_id)
