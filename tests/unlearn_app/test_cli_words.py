"""The words and flags of the `unlearn` command line: `unlearn --version`; every subcommand's --help has a
description and ends with example commands, each of which the real parser accepts; uploads are private unless
`--public`, for every command that uploads (`submit`'s old `--private` still works, with a one-line notice)."""

from __future__ import annotations

import argparse
import importlib.metadata
import shlex

import pytest

from fixtures.leaderboard import tofu_records, unlearn_run_folder, write_tofu_run
from unlearn_app.catalogue import all_parsers
from unlearn_app.cli import build_parser, main
from unlearn_app.commands._examples import EXAMPLES


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's parser (nested ones too), by what is typed after `unlearn`."""
    return {p.prog.removeprefix("unlearn "): p for p in all_parsers(parser) if p.prog != "unlearn"}


def test_version_prints_the_installed_versions(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    versions = {name: importlib.metadata.version(name) for name in ("lm-eval-unlearning", "lm-eval")}
    assert capsys.readouterr().out == f"unlearn {versions['lm-eval-unlearning']} (lm-eval {versions['lm-eval']})\n"


def test_every_subcommand_has_a_description_and_examples_that_parse():
    parser = build_parser()
    commands = subcommands(parser)
    assert len(commands) > 25 and set(EXAMPLES) == set(commands)  # one entry per subcommand, none for a gone one
    for name, sub in commands.items():
        assert sub.description, f"`unlearn {name} --help` has no description"
        text = sub.format_help()
        assert "\nexamples:\n" in text, name
        assert any(e.startswith(f"unlearn {name}") for e in EXAMPLES[name]), f"no `unlearn {name}` example"
        for example in EXAMPLES[name]:
            assert f"\n  {example}\n" in text, f"{name}: {example!r} is not shown on a line of its own"
            if example.startswith("unlearn "):
                args = parser.parse_args(shlex.split(example)[1:])  # a renamed flag or subcommand fails here
                assert callable(getattr(args, "func", None)), example
    # a command's help built alone (as `unlearn demo --help` builds it) is the same
    alone = subcommands(build_parser("demo"))["demo"].format_help()
    assert alone == commands["demo"].format_help()


def test_demo_methods_and_tasks_dir_describe_themselves_beyond_their_one_line():
    parser = build_parser()
    helps = {a.dest: a.help for a in next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
             ._choices_actions}
    for name in ("demo", "methods", "tasks-dir"):
        description = subcommands(parser)[name].description
        assert len(description) > len(helps[name]) + 40, name
        assert name in parser.format_help() and helps[name].split()[0] in " ".join(parser.format_help().split())


def test_examples_keep_an_epilog_s_own_text():
    ci = subcommands(build_parser())["ci"].format_help()
    assert ci.index("Checks: LEFT OP RIGHT") < ci.index("\nexamples:\n  unlearn ci --model ckpt/npo")


def test_every_upload_is_private_unless_public():
    commands = subcommands(build_parser())
    for name in ("run", "push", "submit"):
        text = commands[name].format_help()
        assert "--public" in text and "--private" not in text, name


@pytest.fixture
def submit_runs(tmp_path, monkeypatch):
    """A retain run and an `unlearn run` folder; `store.upload` replaced by a recorder of its `private`."""
    import unlearn_app.leaderboard.store as store

    ref = tofu_records(1)
    write_tofu_run(tmp_path / "ref", ref)
    npo = unlearn_run_folder(tmp_path / "npo", "npo", {"beta": 0.1}, tofu_records(2, 0.3), ref)
    uploads: list[bool] = []
    monkeypatch.setattr(store, "upload", lambda built, repo, private=False: uploads.append(private) or "url")
    return ["submit", str(npo), "--reference", str(tmp_path / "ref"), "--repo", "me/board"], uploads


def test_submit_uploads_private_unless_public(submit_runs, capsys):
    command, uploads = submit_runs
    assert main(command) == 0 and main([*command, "--public"]) == 0
    assert uploads == [True, False]
    assert "--private" not in capsys.readouterr().err
    assert main([*command, "--private"]) == 0 and uploads[-1] is True  # the old flag: the default now, said once
    notices = [line for line in capsys.readouterr().err.splitlines() if "--private" in line]
    assert notices == ["unlearn submit: --private is the default now (as for `unlearn run` and `unlearn push`); "
                       "the flag can go"]
    assert main([*command, "--private", "--public"]) == 2 and len(uploads) == 3
    assert "contradict" in capsys.readouterr().err
