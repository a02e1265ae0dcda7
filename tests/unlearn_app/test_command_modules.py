"""Every `unlearn` subcommand comes from a module of unlearn_app.commands, found without a list to edit."""

import argparse

from unlearn_app.cli import build_parser, command_modules


def _top_level(parser: argparse.ArgumentParser) -> list[str]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(action.choices)


def test_subcommands_in_help_order():
    assert _top_level(build_parser()) == [
        "demo", "run", "sweep", "report", "export-ou", "methods", "push", "submit", "leaderboard", "watermark", "verify", "waterdrum", "deep-unlearning", "klom",
        "ulira", "margins", "blur-references", "ci", "attack", "tasks-dir"]


def test_each_command_module_adds_its_own_subcommands():
    seen: dict[str, str] = {}
    for module in command_modules():
        parser = argparse.ArgumentParser()
        module.add_parsers(parser.add_subparsers())
        for name in _top_level(parser):
            assert name not in seen, f"{name} added by {seen.get(name)} and {module.__name__}"
            seen[name] = module.__name__
    assert seen["klom"] != seen["ulira"] != seen["margins"]  # one module per concept
    assert seen["run"] == "unlearn_app.commands.run" and seen["tasks-dir"] == "unlearn_app.commands.tasks_dir"
    assert sorted(seen) == sorted(_top_level(build_parser()))
