"""Every page a `--help` text points to exists: `docs/<page>.md[#anchor]`, `task_yaml/<benchmark>/README.md[#anchor]`,
and a README section named in quotes (`the README's 'Install'`)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from tests.test_docs import anchors, github_slug
from unlearn_app.catalogue import all_parsers
from unlearn_app.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
PAGE = re.compile(r"\b((?:docs/[\w./-]+|task_yaml/\w+/README)\.md)(?:#([\w-]+))?")
README_SECTION = re.compile(r"README(?:\.md)?'s (?:section )?'([^']+)'")


def help_texts(parser: argparse.ArgumentParser) -> list[tuple[str, str]]:
    """(where, text) for the description, epilog, and every option's and subcommand's help of ``parser``."""
    texts = [(parser.prog, parser.description or ""), (parser.prog, parser.epilog or "")]
    for action in parser._actions:
        name = "/".join(action.option_strings) or action.dest
        texts.append((f"{parser.prog} {name}", action.help or ""))
        for choice in getattr(action, "_choices_actions", []):
            texts.append((f"{parser.prog} {choice.dest}", choice.help or ""))
    return texts


def broken_pointers(parser: argparse.ArgumentParser, root: Path = ROOT) -> list[str]:
    """``WHERE: POINTER`` for each page or section a help text of ``parser`` (and its subcommands) names that does
    not exist in ``root``."""
    broken = []
    readme_sections = {github_slug(h) for h in re.findall(r"^#+ (.+)$", (root / "README.md").read_text(), re.M)}
    for p in all_parsers(parser):
        for where, text in help_texts(p):
            for page, anchor in PAGE.findall(text):
                if not (root / page).is_file():
                    broken.append(f"{where}: {page} does not exist")
                elif anchor and anchor not in anchors(root / page):
                    broken.append(f"{where}: {page} has no section #{anchor}")
            for section in README_SECTION.findall(text):
                if github_slug(section) not in readme_sections:
                    broken.append(f"{where}: README.md has no section {section!r}")
    return broken


def test_every_help_pointer_resolves():
    parser = build_parser()
    assert broken_pointers(parser) == []
    pointers = [m for p in all_parsers(parser) for _, text in help_texts(p) for m in PAGE.findall(text)]
    assert ("docs/ci.md", "") in pointers and ("docs/sweep.md", "") in pointers  # the check sees real pointers


def test_a_broken_pointer_is_named():
    parser = argparse.ArgumentParser(prog="unlearn")
    sub = parser.add_subparsers()
    ci = sub.add_parser("ci", help="Gate a checkpoint (docs/ci.md#checks).", epilog="See docs/nowhere.md.")
    ci.add_argument("--suite", help="Suite YAML (see the README's 'CI evaluation').")
    ci.add_argument("--out", help="Output folder (docs/ci.md#no-such-section, task_yaml/tofu/README.md#metrics).")
    assert broken_pointers(parser) == [
        "unlearn ci: docs/nowhere.md does not exist",
        "unlearn ci --suite: README.md has no section 'CI evaluation'",
        "unlearn ci --out: docs/ci.md has no section #no-such-section",
    ]
