"""Pages and messages name huggingface_hub's command line as it ships now, ``hf`` (``hf auth login``, ``hf download``,
``hf upload``), never the retired ``huggingface-cli``.

Read: the user pages (README, ``docs/**/*.md``, ``task_yaml/*/README.md``) and every string in the package's Python
sources (the messages, help texts and docstrings a user can see)."""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "task_yaml").glob("*/README.md"))]
PACKAGES = ("harness_ext", "unlearn_tasks", "unlearn_methods", "unlearn_app")
SOURCES = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))
OLD = "huggingface-cli"


def strings_with(source: str, word: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal of the Python ``source`` (f-string parts included) that holds ``word``."""
    kinds = {tokenize.STRING, *(getattr(tokenize, k) for k in ("FSTRING_MIDDLE",) if hasattr(tokenize, k))}
    return [(t.start[0], t.string) for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type in kinds and word in t.string]


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_user_page_says_hf_not_huggingface_cli(path):
    lines = [n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if OLD in line]
    assert lines == [], f"{path.relative_to(ROOT)}: `{OLD}` on line(s) {lines}; write the `hf` command"


def test_no_message_of_the_package_says_huggingface_cli():
    assert len(SOURCES) > 100  # the package's sources were found
    found = {str(p.relative_to(ROOT)): strings_with(p.read_text(encoding="utf-8"), OLD) for p in SOURCES}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_string_scan_finds_the_word_in_plain_and_f_strings_but_not_in_comments():
    source = ('x = "run huggingface-cli login"  # huggingface-cli in a comment\n'
              'y = f"{x}: `huggingface-cli` or the page"\nz = "hf auth login"\n')
    assert [line for line, _ in strings_with(source, OLD)] == [1, 2]
