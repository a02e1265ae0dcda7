"""The documentation speaks to users: what was measured, when and on what machine; never which of this project's
issues asked for it, nor who measured it.

The rule, over the README, ``docs/**/*.md`` and the benchmark READMEs (``task_yaml/*/README.md``), code blocks included:

- An issue or pull-request number (``issue 30``, ``issue #30``, ``issues 12 and 29``, ``PR #7``, ``(#30)``) is
  refused unless another project is named within the 60 characters before it on the same line: ``open-unlearning's
  issue #139``, ``upstream lm-eval (PRs #4013 / #4015)``, or a link to that project's issue. A number with no project
  named is this project's own issue tracker, which users cannot see.
- Wording about who did the work is refused: ``I measured`` / ``we ran``, helpers, engineers, sessions or the lead as
  the people at work, ``measured by``, ``on my machine``. Say what was measured, when (date), on what machine and under
  what load.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
USER_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "task_yaml").glob("*/README.md"))]

#: Projects whose issues and pull requests a page may cite (by name, within 60 characters before the number).
OTHER_PROJECTS = ("open-unlearning", "lm-eval", "lm-evaluation-harness", "EleutherAI", "vLLM", "transformers", "PEFT",
                  "datasets", "huggingface_hub", "huggingface", "accelerate", "Ray", "MkDocs", "PyTorch", "torch",
                  "locuslab", "TOFU", "MUSE", "RWKU", "WaterDrum", "Waterfall", "CLEAR", "WMDP", "llama-models",
                  "github.com")

ISSUE_NUMBER = re.compile(r"\b(?:issues?|PRs?|pull requests?)\s+#?\d+|\(#\d+\)", re.I)
WHO = re.compile(
    r"\b(?:I|we)\s+(?:measured|ran|timed|saw|found|tested)\b"
    r"|\b(?:helpers?|engineers?|sessions?|the lead)(?:'s?)?\s+(?:jobs?|test runs?|runs?|rule|measured|ran|were|was"
    r"|wrote|merges?|builds?)\b"
    r"|\b(?:other|seven|\d+(?:-\d+)?)\s+(?:helpers|engineers|developers|sessions)\b"
    r"|\b(?:docs|other) helper\b|\bmeasured by\b|\bon (?:my|our|his|her|their|whose) machine\b"
    r"|\bsessions? that (?:wrote|measured|ran)\b",
    re.I)


def _project_named_before(line: str, start: int) -> bool:
    before = line[max(0, start - 60):start].lower()
    return any(name.lower() in before for name in OTHER_PROJECTS)


def own_issue_references(text: str) -> list[str]:
    """The issue / PR numbers of ``text`` with no other project named before them (line by line)."""
    return [m.group(0) for line in text.splitlines() for m in ISSUE_NUMBER.finditer(line)
            if not _project_named_before(line, m.start())]


def who_wording(text: str) -> list[str]:
    return [m.group(0) for m in WHO.finditer(text)]


@pytest.mark.parametrize("path", USER_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_user_page_cites_no_own_issue_and_says_not_who_measured(path):
    text = path.read_text()
    assert own_issue_references(text) == [], (
        f"{path.relative_to(ROOT)}: cites this project's issues; say what was done and when instead")
    assert who_wording(text) == [], (
        f"{path.relative_to(ROOT)}: says who did the work; say what was measured, when and on what machine")


@pytest.mark.parametrize("text, refused", [
    ("## Figures to re-measure idle (issue 30)", ["issue 30"]),
    ("The figures of issue #30 below", ["issue #30"]),
    ("a test (issues 12 and 29)", ["issues 12"]),
    ("fixed in PR #7.", ["PR #7"]),
    ("re-measured (#30).", ["(#30)"]),
    ("open-unlearning's issue #139 reports the off-by-one", []),
    ("which upstream lm-eval is adding (PRs #4013 / #4015), so", []),
    ("see [vLLM issue 1234](https://github.com/vllm-project/vllm/issues/1234)", []),
    ("a tissue 3 cells wide; issued 5 times", []),
])
def test_issue_rule(text, refused):
    assert own_issue_references(text) == refused


@pytest.mark.parametrize("text, refused", [
    ("I measured 151 s idle", ["I measured"]),
    ("while other engineers' jobs shared the machine", ["other engineers"]),
    ("as engineers' test runs shared it", ["engineers' test runs"]),
    ("2026-11-25: 7-10 helpers on the 2 cores", ["7-10 helpers"]),
    ("as the helpers' rule asks", ["helpers' rule"]),
    ("no GPU machine was lent to the sessions that wrote this section", ["sessions that wrote"]),
    ("The docs helper builds the rest of this page, and the lead merges the two.", ["docs helper", "the lead merges"]),
    ("measured by the reviewer on my machine", ["measured by", "on my machine"]),
    ("Helpers every command uses (`error`, `InputError`) are in `commands/__init__.py`.", []),
    ("measured 2026-11-23 on the 2-core VM (load average 0.5), the pytest session fixture", []),
])
def test_who_rule(text, refused):
    assert who_wording(text) == refused
