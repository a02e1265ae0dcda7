"""MkDocs hooks: the site reads the repository's Markdown as GitHub does.

- Lists as CommonMark reads them (what GitHub shows). MkDocs' Markdown (Python-Markdown) wants a list item's later
  paragraphs, code blocks, tables and nested lists indented by four spaces per level and a blank line before a list
  or a table; GitHub takes them at the column where the item's text starts (three spaces after ``1.``, two after
  ``-``). Before MkDocs reads a page, each list item's lines are re-indented from GitHub's column to MkDocs' one, and
  a blank line is put where MkDocs needs one, so a page written for GitHub renders the same on the site.
  ``docs/check_site.py`` checks the built HTML for what still comes out as literal text.
- A link to a benchmark's README in its task folder (``task_yaml/<benchmark>/README.md``, what the repository's
  Markdown files link to) points to that README's page on the site, ``benchmarks/<benchmark>.md`` (the README's copy,
  written by ``python -m unlearn_app.catalogue``).

Nothing here imports the package: the site builds from a docs-only install (``docs/requirements.txt``, no torch).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

from markdown_it import MarkdownIt

_BENCHMARK_README = re.compile(r"\]\((?:\.\./|\./)*task_yaml/(\w+)/README\.md(#[^)\s]*)?\)")
_COMMONMARK = MarkdownIt("commonmark").enable("table")
_INDENT = 4  # Python-Markdown's tab_length: the indentation of one list level


def on_page_markdown(markdown: str, page, **kwargs) -> str:
    here = posixpath.dirname(page.file.src_uri)

    def target(match: re.Match) -> str:
        page_path = posixpath.relpath(f"benchmarks/{match.group(1)}.md", here or ".")
        return f"]({page_path}{match.group(2) or ''})"

    return _BENCHMARK_README.sub(target, commonmark_lists(markdown))


@dataclass
class _Item:
    first: int  # the line of the item's marker
    end: int  # one past its last line
    column: int  # where its text starts, as CommonMark reads it
    target: int  # where Python-Markdown wants its text: four spaces per list level


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


_MARKER = re.compile(r" *(?:\d{1,9}[.)]|[-*+])")


def _content_column(line: str, marker_from: int) -> int | None:
    """The column of a list item's text on its marker line (the marker at or after ``marker_from``): after the
    marker and one to four spaces (one when the text is further, or when there is none)."""
    marker = _MARKER.match(line, marker_from)
    if marker is None:  # not where CommonMark put it (a case this reading does not know): leave the item alone
        return None
    at = marker.end()
    spaces = len(line[at:]) - len(line[at:].lstrip(" "))
    return at + (spaces if 1 <= spaces <= 4 and line[at:].strip() else 1)


def commonmark_lists(markdown: str) -> str:
    """``markdown`` with its lists re-indented for Python-Markdown (see the module docstring). Lines outside list
    items, and lists inside block quotes, are left as they are."""
    if "\t" in markdown:
        return markdown  # CommonMark and Python-Markdown count tabs differently: leave such a page alone
    lines = markdown.split("\n")
    blank = {n for n, line in enumerate(lines) if not line.strip()}
    inserted: set[int] = set()  # lines that get a blank line before them

    def blank_inside(start: int, stop: int) -> bool:  # a blank line after line `start`, before line `stop`
        return any(start < n < stop for n in blank) or any(start < n < stop for n in inserted)

    def separate(line: int) -> None:
        if line > 0 and line - 1 not in blank:
            inserted.add(line)

    items: list[_Item] = []
    stack: list[_Item] = []  # the open list items, outermost first
    previous: list[_Item | None] = [None]  # per open list: its last item so far
    quotes = 0
    for token in _COMMONMARK.parse(markdown):
        if token.type in ("blockquote_open", "blockquote_close"):
            quotes += 1 if token.type == "blockquote_open" else -1
        if quotes:
            continue
        if token.type in ("bullet_list_open", "ordered_list_open"):
            first = token.map[0]
            if not stack or blank_inside(stack[-1].first, first):  # a list after a paragraph needs a blank line,
                separate(first)                                        # but not in an item's first block
            previous.append(None)
        elif token.type in ("bullet_list_close", "ordered_list_close"):
            previous.pop()
        elif token.type == "table_open":
            separate(token.map[0])
        elif token.type == "list_item_open":
            first, end = token.map
            before = previous[-1]
            if before is not None and blank_inside(before.first, first):
                separate(first)  # after an item of several blocks, a new item needs a blank line
            column = _content_column(lines[first], stack[-1].column if stack else 0)
            target = _INDENT * (len(stack) + 1)
            item = _Item(first, end, target if column is None else column, target)
            items.append(item)
            stack.append(item)
            previous[-1] = item
        elif token.type == "list_item_close":
            stack.pop()
    owner: dict[int, _Item] = {}
    for item in items:  # outer items first: an inner item's lines end up owned by the inner item
        for n in range(item.first + 1, min(item.end, len(lines))):
            owner[n] = item
    out: list[str] = []
    for n, line in enumerate(lines):
        if n in inserted:
            out.append("")
        item = owner.get(n)
        if item is not None and line.strip() and _indent(line) >= item.column:
            line = " " * (_indent(line) + item.target - item.column) + line.lstrip(" ")
        out.append(line)
    return "\n".join(out)
