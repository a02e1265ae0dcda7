"""`--help` of every `unlearn` subcommand shows real defaults and never the noise "(default: None)"."""

import argparse

from unlearn_app.cli import build_parser


def _all_parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _all_parsers(sub)


def test_no_subcommand_help_says_default_none():
    helps = {p.prog: p.format_help() for p in _all_parsers(build_parser())}
    assert len(helps) > 10
    assert [prog for prog, text in helps.items() if "(default: None)" in " ".join(text.split())] == []
    relearn = " ".join(helps["unlearn attack relearn"].split())
    assert "(default: 20)" in relearn  # real defaults are still shown
