"""The built site shows what GitHub shows: no Markdown left as literal text, no numbered list split in pieces.

MkDocs' Markdown (Python-Markdown) reads some Markdown differently from GitHub (CommonMark): a list right after a
paragraph, or a list item's code block or table indented less than four spaces, comes out as literal ``1.``, ``-``
and ``[ ]`` text or as a list restarted at every item; ``mkdocs build --strict`` does not see it. ``docs/hooks.py``
makes MkDocs read lists as GitHub does; this check, run on the built HTML by ``.ci/run`` (and by
``tests/test_docs_site.py``), fails where a page still comes out wrong:

    mkdocs build --strict --site-dir SITE && python docs/check_site.py SITE    # exit 1, one line per problem

It flags, outside ``<pre>``: a paragraph line that starts with a list marker (``1.``, ``2)``, ``-``, ``*``, ``+``), a
task box (``[ ]``, ``[x]``), a code fence or a table row (re-wrap a sentence whose line would start with "2. "); a list item whose text starts with a literal task box; and an ordered list that starts at a
number other than 1 (the tail of a list that a block between its items cut in two); and a table row with text in
its first cell only (the paragraph right after a table, with no blank line between, read as rows: its first line
goes into the last row as an extra cell, which is dropped, and its other lines become one-cell rows).
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

_LITERAL = re.compile(r"\s*(?:\d{1,9}[.)]|[-*+])(?:\s|$)|\s*\[[ xX]\]\s|\s*```|\s*\|.*\|")
_TASK_BOX = re.compile(r"\s*\[[ xX]\]\s")
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class _Page(HTMLParser):
    """Collects the text of every ``<p>`` and ``<li>`` outside ``<pre>``, and the ``start`` of every ``<ol>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, list[str]]] = []  # (tag, text pieces) of the open <p> / <li> elements
        self.pre = 0
        self.problems: list[str] = []
        self.row: list[list[str]] | None = None  # the text pieces of each cell of the open <tr>

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID:
            return
        if tag == "pre":
            self.pre += 1
        elif tag == "ol" and self.pre == 0:
            start = dict(attrs).get("start") or "1"
            if start.strip() != "1":
                self.problems.append(f"a numbered list starts at {start} (a list cut in two: indent the blocks "
                                     "between its items to the item's text)")
        if tag in ("p", "li") and self.pre == 0:
            self.open.append((tag, []))
        if tag == "tr":
            self.row = []
        elif tag in ("td", "th") and self.row is not None:
            self.row.append([])

    def handle_endtag(self, tag: str) -> None:
        if tag == "pre":
            self.pre = max(0, self.pre - 1)
        if tag == "tr" and self.row is not None:
            cells = ["".join(c).strip() for c in self.row]
            if len(cells) > 1 and cells[0] and not any(cells[1:]):
                self.problems.append(f"a table row has text in its first cell only (a paragraph right after a table "
                                     f"is read as rows: put a blank line after the table): {_excerpt(cells[0])}")
            self.row = None
        if tag in ("p", "li") and self.open and self.open[-1][0] == tag:
            self._check(*self.open.pop())

    def handle_data(self, data: str) -> None:
        if self.open and self.pre == 0:
            self.open[-1][1].append(data)
        if self.row:
            self.row[-1].append(data)

    def _check(self, tag: str, pieces: list[str]) -> None:
        text = "".join(pieces)
        if tag == "li":
            if _TASK_BOX.match(text):
                self.problems.append(f"a list item starts with a literal task box: {_excerpt(text)}")
            return
        lines = text.split("\n")
        for i, line in enumerate(lines):
            if _LITERAL.match(line):
                self.problems.append(f"a paragraph {'starts' if i == 0 else 'has a line'} with Markdown left as "
                                     f"text: {_excerpt(line)}")
                return


def _excerpt(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= width else text[:width - 3] + "...")


def page_problems(html: str) -> list[str]:
    """What renders wrong in one HTML page (empty when nothing does)."""
    page = _Page()
    page.feed(html)
    page.close()
    return page.problems


def site_problems(site: Path) -> list[str]:
    """``PAGE: problem`` for every page of the built site ``site``."""
    return [f"{path.relative_to(site)}: {problem}"
            for path in sorted(site.rglob("*.html")) for problem in page_problems(path.read_text(encoding="utf-8"))]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print("usage: python docs/check_site.py SITE_DIR (the folder `mkdocs build --site-dir` wrote)", file=sys.stderr)
        return 2
    problems = site_problems(Path(args[0]))
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"{len(problems)} rendering problem(s): see docs/check_site.py", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
