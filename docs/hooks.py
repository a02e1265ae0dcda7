"""MkDocs hook: a link to a benchmark's README in its task folder (``task_yaml/<benchmark>/README.md``, what the
repository's Markdown files link to, and what include-markdown rewrites relative to the including page) points to
that README's page on the site, ``benchmarks/<benchmark>.md``."""

from __future__ import annotations

import posixpath
import re

_BENCHMARK_README = re.compile(r"\]\((?:\.\./|\./)*task_yaml/(\w+)/README\.md(#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page, **kwargs) -> str:
    here = posixpath.dirname(page.file.src_uri)

    def target(match: re.Match) -> str:
        page_path = posixpath.relpath(f"benchmarks/{match.group(1)}.md", here or ".")
        return f"]({page_path}{match.group(2) or ''})"

    return _BENCHMARK_README.sub(target, markdown)
