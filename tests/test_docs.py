"""The README stays a true landing page, and the documentation's links and hand-written tables follow the code.

`mkdocs build --strict` (in .ci/run) checks the site's links and anchors; these tests check what GitHub shows: the
repository's Markdown files, read in place.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
MARKDOWN_FILES = [README, *sorted((ROOT / "task_yaml").glob("*/README.md")), *sorted((ROOT / "docs").rglob("*.md"))]


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (but - and _), spaces to hyphens."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    found = {github_slug(m) for m in re.findall(r"^#+ (.+)$", text, flags=re.M)}
    return found | set(re.findall(r'<a id="([^"]+)"', text))


def relative_links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_readme_is_a_landing_page():
    text = README.read_text()
    assert len(text.splitlines()) <= 300, "README.md is a landing page: move details into docs/"
    assert "pip install torch==2.13.0 . && unlearn demo" in text
    assert 'pip install torch==2.13.0 -e ".[dev,waterdrum]" && python -m ruff check . && python -m pytest -q' in text


def test_readme_method_count_is_the_registry_s():
    from unlearn_methods import all_methods

    counts = re.findall(r"(\d+) unlearning methods", README.read_text())
    assert counts and all(int(c) == len(all_methods()) for c in counts), (counts, len(all_methods()))


@pytest.mark.parametrize("path", MARKDOWN_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(path):
    """Every relative link of a Markdown file points to an existing file, and a heading or <a id> of it."""
    for link in relative_links(path):
        target, _, anchor = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        assert file.exists(), f"{path.relative_to(ROOT)}: link {link!r} points to nothing"
        if anchor and file.suffix == ".md" and "{%" not in file.read_text():
            assert anchor in anchors(file), f"{path.relative_to(ROOT)}: no heading for #{anchor} in {target or path.name}"


def test_readme_links_every_benchmark_and_docs_page():
    links = set(relative_links(README))
    for folder in sorted(p for p in (ROOT / "task_yaml").iterdir() if p.is_dir() and not p.name.startswith("_")):
        assert (folder / "README.md").is_file(), f"task_yaml/{folder.name} has no README.md"
        assert f"task_yaml/{folder.name}/README.md" in links, f"README's benchmark table lacks {folder.name}"
        page = ROOT / "docs" / "benchmarks" / f"{folder.name}.md"
        assert f"task_yaml/{folder.name}/README.md" in page.read_text(), f"{page} must include the benchmark's README"
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text().replace("!!python", "#"))["nav"]
    pages = set(re.findall(r"[\w/-]+\.md", str(nav)))
    for page in pages - {"index.md"}:
        assert f"docs/{page}" in links or page.startswith("benchmarks/"), f"README's documentation table lacks {page}"


def test_losses_table_names_every_method():
    from unlearn_methods import all_methods

    text = (ROOT / "docs" / "methods.md").read_text()
    losses = text[text.index("## Losses"):]
    rows = re.findall(r"^\| `(\w+)` \|", losses, flags=re.M)
    assert sorted(rows) == sorted(all_methods()), "docs/methods.md's Losses table must name every registered method"
