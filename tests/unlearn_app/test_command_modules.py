"""Every `unlearn` subcommand comes from a module of unlearn_app.commands, found without a list to edit."""

import argparse

from unlearn_app.cli import build_parser, command_modules


def _top_level(parser: argparse.ArgumentParser) -> list[str]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(action.choices)


def test_subcommands_in_help_order():
    assert _top_level(build_parser()) == [
        "demo", "run", "sweep", "report", "export-ou", "judge", "methods", "push", "submit", "leaderboard", "watermark", "verify", "waterdrum", "deep-unlearning", "klom",
        "ulira", "margins", "blur-references", "depth", "ci", "attack", "tasks-dir"]


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


def test_a_command_builds_only_its_modules_parser_with_the_same_help():
    from unlearn_app.cli import module_name

    full = build_parser()
    commands = _top_level(full)
    full_action = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    for name in commands:
        parser = build_parser(name)
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        assert len(action.choices) < len(commands), name  # not every command's parser
        assert f"unlearn_app.commands.{module_name(name)}" in _modules_of(action.choices[name]), name
        assert action.choices[name].format_help() == full_action.choices[name].format_help(), name
    assert _top_level(build_parser("no-such-command")) == commands  # unknown: every command, for argparse's error
    assert _top_level(build_parser(None)) == commands


def _modules_of(parser: argparse.ArgumentParser) -> set[str]:
    """Modules of the functions a parser (or its subcommands) runs."""
    found = {getattr(parser._defaults.get("func"), "__module__", None)}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _modules_of(sub)
    return found
