"""The documentation site renders what GitHub renders, and builds without torch.

MkDocs reads Markdown with Python-Markdown, GitHub with CommonMark: ``docs/hooks.py`` re-indents lists so that MkDocs
reads them as GitHub does, and ``docs/check_site.py`` (run by .ci/run on the built site) flags Markdown left as
literal text. Here: the check on hand-written HTML, the hook side by side with a CommonMark parser (markdown-it-py),
and the whole site built in a process where ``import torch`` fails.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from fixtures.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    return load_script(ROOT / "docs" / f"{name}.py", f"_docs_{name}")


check_site = _load("check_site")


# --------------------------------------------------------------------------- the check on the built HTML
@pytest.mark.parametrize("html, problems", [
    ("<ol><li>a</li><li>b</li></ol>", 0),
    ("<ol start=\"1\"><li>a</li></ol>", 0),
    ("<ol start=\"3\"><li>c</li></ol>", 1),  # the tail of a numbered list cut in two
    ("<p>1. <strong>Task YAML.</strong> One file</p>", 1),
    ("<p>Intro:\n- a\n- b</p>", 1),  # a list right after a paragraph, left as text
    ("<p>About 20 minutes.\n2. <strong>The same</strong></p>", 1),
    ("<p>* starred</p>", 1),
    ("<p>[ ] to do</p>", 1),
    ("<ul><li>[x] done</li></ul>", 1),  # a task box without the tasklist extension
    ("<ul><li><input type=\"checkbox\" disabled checked> done</li></ul>", 0),
    ("<p>```python\nx = 1</p>", 1),
    ("<p>| a | b |\n|---|---|</p>", 1),
    ("<pre><code>- a\n1. b\n[ ] c\n| x |</code></pre>", 0),  # code shows Markdown as it is
    ("<div class=\"highlight\"><pre><span></span><code>1. b</code></pre></div>", 0),
    ("<p>forget - retain, 3 - 1 = 2, the gap [x] marks</p>", 0),  # markers inside a line are text
    ("<p>Year\n2026 was</p>", 0),
    ("<table><tr><td>- none</td></tr></table>", 0),
    # a paragraph right after a table, no blank line between: its lines became one-cell rows
    ("<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>x</td><td><code>y</code></td></tr>"
     "<tr><td>defaults (10 epochs</td><td></td></tr><tr><td>up for one epoch</td><td></td></tr></tbody></table>", 2),
    ("<table><tr><td>x</td><td>n/a</td></tr><tr><td></td><td>y</td></tr><tr><td></td><td></td></tr></table>", 0),
])
def test_check_flags_markdown_left_as_text(html, problems):
    assert len(check_site.page_problems(html)) == problems, check_site.page_problems(html)


def test_check_names_the_page_and_exits_1(tmp_path, capsys):
    (tmp_path / "ok").mkdir()
    (tmp_path / "ok" / "index.html").write_text("<p>fine</p><ol><li>a</li></ol>")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "index.html").write_text("<p>Steps:\n1. one\n2. two</p>")
    assert check_site.main([str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "bad/index.html: a paragraph has a line with Markdown left as text: '1. one'" in err
    assert "ok/" not in err
    (tmp_path / "bad" / "index.html").unlink()
    assert check_site.main([str(tmp_path)]) == 0
    assert check_site.main([str(tmp_path / "missing")]) == 2


# --------------------------------------------------------------------------- the hook, side by side with CommonMark
def _mkdocs_markdown():
    """Python-Markdown with the extensions mkdocs.yml configures."""
    markdown = pytest.importorskip("markdown")
    pytest.importorskip("pymdownx")
    from tests.test_docs import mkdocs_config

    names, configs = [], {}
    for entry in mkdocs_config()["markdown_extensions"]:
        name, config = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
        names.append(name)
        configs[name] = config or {}
    return markdown.Markdown(extensions=names, extension_configs=configs)


class _Blocks(HTMLParser):
    """The block structure of an HTML fragment: lists, items, code blocks, tables, check boxes (not <p>: a loose
    list item wraps its text in <p>, a tight one does not, and both render as one item)."""

    TAGS = {"ol", "ul", "li", "pre", "table", "blockquote", "h1", "h2", "h3"}

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag in self.TAGS:
            self.seen.append(tag)
        elif tag == "input":
            self.seen.append("checkbox")

    def handle_endtag(self, tag):
        if tag in self.TAGS:
            self.seen.append("/" + tag)


def _blocks(html: str) -> list[str]:
    parser = _Blocks()
    parser.feed(html)
    return parser.seen


GITHUB_STYLE = [
    # a numbered checklist whose items hold code blocks and paragraphs at the item's column (three spaces)
    "1. **Task YAML.** One file:\n\n   ```yaml\n   task: toy\n   ```\n\n   More text.\n\n"
    "2. **Task class.** Subclass it:\n\n   ```python\n   x = 1\n   ```\n\n3. **Options.** A dataclass.\n",
    # an item with a table right before the next item, no blank line (what "Adding a method" had)
    "1. **The class.** Attributes:\n\n   | a | b |\n   |---|---|\n   | 1 | 2 |\n2. **Params.** Fields.\n3. Done.\n",
    # a list right after a paragraph, nested bullets at two and three spaces, lazy continuation
    "Rules:\n- one\n  more of one\n- two\n  - nested\n  - nested too\n\n1. first\n   - sub\n2. second\n",
    # a bullet whose later paragraph and nested list come after a blank line, then the next bullet at once
    "- **Skips fail.** With CI:\n  - data\n  - PIL\n\n  The message says what to do.\n- **Data.** Elsewhere.\n",
    # task lists and an indented code block inside an item
    "- [x] done\n- [ ] open\n\n1. Run:\n\n       python bench.py \\\n           --pairs 3\n\n   About 20 minutes.\n"
    "2. The same on the tiny model.\n",
    # a ten-item list (four-character markers), and a quote that is left alone
    "".join(f"{n}. item {n}\n" for n in range(1, 11)) + "\n> - quoted\n>   list\n",
]


@pytest.mark.parametrize("source", GITHUB_STYLE, ids=range(len(GITHUB_STYLE)))
def test_hook_gives_mkdocs_the_lists_github_shows(source):
    markdown_it = pytest.importorskip("markdown_it")
    hooks = _load("hooks")
    commonmark = _blocks(markdown_it.MarkdownIt("commonmark").enable("table").render(source))
    md = _mkdocs_markdown()
    html = md.reset().convert(hooks.commonmark_lists(source))
    # GitHub shows task boxes as check boxes too (the tasklist extension of GitHub Flavored Markdown)
    expected = [t for t in commonmark if t != "checkbox"]
    if "[x]" in source:
        expected = _with_checkboxes(expected, source)
    assert _blocks(html) == expected
    assert check_site.page_problems(html) == []


def _with_checkboxes(blocks: list[str], source: str) -> list[str]:
    """``blocks`` with a check box after the <li> of each ``- [ ]`` / ``- [x]`` item (in order)."""
    boxes = iter(bool(re.match(r"\s*[-*+] \[[ xX]\]", line)) for line in source.splitlines()
                 if re.match(r"\s*(?:[-*+]|\d+[.)])\s", line))
    out = []
    for tag in blocks:
        out.append(tag)
        if tag == "li" and next(boxes, False):
            out.append("checkbox")
    return out


def test_without_the_hook_mkdocs_reads_the_checklist_wrong():
    """The first sample, as MkDocs read it before the hook: three lists of one item, code and text outside them."""
    pytest.importorskip("markdown_it")
    html = _mkdocs_markdown().convert(GITHUB_STYLE[0])
    assert _blocks(html).count("ol") == 3
    assert len(check_site.page_problems(html)) == 2  # <ol start="2">, <ol start="3">


def test_hook_leaves_pages_without_lists_alone():
    hooks = _load("hooks")
    text = "# Title\n\nA paragraph.\n\n```bash\n1. not a list\n- nor this\n```\n\n    indented code\n\n| a |\n|---|\n"
    assert hooks.commonmark_lists(text) == text


# --------------------------------------------------------------------------- the whole site, without torch
def test_site_builds_without_torch_and_renders_every_list(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    site = tmp_path / "site"
    no_torch = ("import sys; sys.modules['torch'] = None; from mkdocs.__main__ import cli; "
                "cli(['build', '--strict', '--quiet', '--site-dir', sys.argv[1]])")
    done = subprocess.run([sys.executable, "-c", no_torch, str(site)], cwd=ROOT, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)},
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (site / "contributing" / "index.html").is_file()
    assert check_site.site_problems(site) == []
    html = (site / "contributing" / "index.html").read_text()
    checklist = html[html.index('id="checklist"'):html.index('id="adding-a-method"')]
    assert checklist.count("<ol") == 1 and checklist.count("<ol>") == 1  # one list, numbered from 1
    assert '<link rel="canonical" href="http://127.0.0.1:8000/contributing/">' in html  # site_url's default


def test_docs_install_is_the_docs_extra_and_needs_no_torch():
    listed = [line.strip() for line in (ROOT / "docs" / "requirements.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["docs"]
    assert listed == extra
    assert not any(re.match(r"(torch|lm-eval|transformers|lm-eval-unlearning)\b", req) for req in listed)
    assert re.search(r"pip install (-q )?-r docs/requirements.txt", (ROOT / ".ci" / "run").read_text())
