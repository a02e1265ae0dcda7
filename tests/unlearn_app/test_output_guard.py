"""Issue 29: no command may destroy its input. The walking test reads every subcommand from the parser (a new
command is covered without editing this file) and, for each output option, passes an input path as the output."""

from __future__ import annotations

import argparse
import hashlib
import os

import pytest

from unlearn_app import output_guard
from unlearn_app.argtypes import float_range, int_range, positive_int
from unlearn_app.cli import build_parser, main


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command words, parser) of every subcommand, nested ones (``attack quantize``) included."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if path:
        yield path, parser
    for action in subs:
        for name, child in action.choices.items():
            yield from _leaves(child, (*path, name))


def _writing_commands():
    found = []
    for words, parser in _leaves(build_parser()):
        decl = parser._defaults.get(output_guard.KEY)
        if decl is not None and parser._defaults.get("func") is not None:
            found.append((" ".join(words), parser, decl))
    return found


WRITING = _writing_commands()


def test_every_command_that_writes_declares_its_outputs():
    """Every option whose help says it writes something is a declared output (so the guard sees it)."""
    names = {name for name, _, _ in WRITING}
    assert {"run", "ci", "klom", "ulira", "margins", "margins gather", "report", "attack quantize", "attack relearn",
            "attack report", "watermark", "verify", "waterdrum report", "deep-unlearning sweep"} <= names
    for words, parser in _leaves(build_parser()):
        decl = parser._defaults.get(output_guard.KEY)
        declared = set(decl.outputs) if decl else set()
        for action in parser._actions:
            text = f"{action.help or ''}".lower()
            writes = action.dest in ("out", "output", "plot", "html", "json", "splits_out", "per_sample_out",
                                     "lm_eval_out") or text.startswith(("write", "also write", "output", "folder for"))
            if writes and action.option_strings and action.nargs != 0:  # flags (--update-card) name no path
                assert action.dest in declared, f"unlearn {' '.join(words)} {action.option_strings[0]} is not guarded"


def _argv(words: str, parser: argparse.ArgumentParser, values: dict[str, str], filler: str, free: str) -> list[str]:
    """A command line with ``values`` for those dests and a harmless value for every other required argument: an
    existing file ``filler`` for inputs, a path under the empty folder ``free`` for other outputs."""
    decl = parser._defaults[output_guard.KEY]
    argv = words.split()
    positional = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        value = values.get(action.dest)
        if value is None and not (action.required or not action.option_strings):
            continue
        if value is None:
            if action.choices:
                value = str(next(iter(action.choices)))
            elif action.type in (int, float) or getattr(action.type, "__name__", "") in ("integer", "number"):
                value = "3"
            elif action.dest in decl.outputs:
                value = os.path.join(free, action.dest)
            else:
                value = filler
        if action.metavar and "=" in str(action.metavar):  # NAME=PATH
            value = f"name={value}"
        if action.option_strings:
            argv += [action.option_strings[0], value]
        else:
            positional.append(value)
    return argv[: len(words.split())] + positional + argv[len(words.split()):]


def _digest(path) -> str:
    h = hashlib.sha256()
    for root, _, files in sorted(os.walk(path)) if os.path.isdir(path) else [("", [], [path])]:
        for f in sorted(files):
            full = os.path.join(root, f)
            h.update(full.encode() + b"\0" + open(full, "rb").read())
    return h.hexdigest()


CASES = [(name, out, inp) for name, _, decl in WRITING for out in decl.outputs
         for inp in (*decl.inputs, *decl.scanned)]


@pytest.mark.parametrize("command,output,input_dest", CASES, ids=[f"{c}:{o}<-{i}" for c, o, i in CASES])
@pytest.mark.parametrize("shape", ["file", "folder", "inside-folder"])
def test_an_input_given_as_output_is_refused_and_left_byte_identical(command, output, input_dest, shape, tmp_path,
                                                                     capsys):
    parser, decl = next((p, d) for n, p, d in WRITING if n == command)
    filler = tmp_path / "other_input.json"
    filler.write_text('{"other": true}\n')
    if shape == "file":
        target = tmp_path / "input.json"
        target.write_text('{"precious": [1, 2, 3]}\n')
        given_in = given_out = str(target)
    else:
        target = tmp_path / "input_folder"
        target.mkdir()
        (target / "model.safetensors").write_bytes(b"precious weights")
        (target / "results_2026-01-01T00-00-00.json").write_text('{"results": {}}')
        given_in = str(target)
        if shape == "folder":
            given_out = str(target)
        elif input_dest in decl.scanned:  # a results folder may hold outputs, but never one that is read back
            given_out = str(target / "results_2026-02-02T00-00-00.json")
        else:  # an output inside a model folder
            given_out = str(target / "sub")
    before = _digest(target)
    values = {input_dest: given_in, output: given_out[: -len(s)] if (s := _prefix_suffix(decl, output, shape)) else given_out}
    free = tmp_path / "free"
    free.mkdir()
    argv = _argv(command, parser, values, str(filler), str(free))
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert decl.name(output) in err and ("destroy that input" in err), err
    assert _digest(target) == before
    assert sorted(os.listdir(tmp_path)) == sorted(["other_input.json", "free", target.name])  # nothing else written
    assert os.listdir(free) == []


def _prefix_suffix(decl, output: str, shape: str) -> str:
    """For an output prefix (``attack report --out``): the suffix whose result would hit the input file."""
    suffixes = decl.prefixes.get(output)
    if not suffixes or shape != "file":
        return ""
    return ".json" if ".json" in suffixes else suffixes[0]


def test_an_existing_output_needs_overwrite_and_two_outputs_may_not_share_a_path(tmp_path, capsys):
    u, o, out = tmp_path / "u.npy", tmp_path / "o.npy", tmp_path / "r.json"
    import numpy as np

    np.save(u, np.zeros((2, 4)))
    np.save(o, np.ones((2, 4)))
    out.write_text("an earlier result\n")
    base = ["klom", "--unlearned", str(u), "--oracle", str(o), "--quiet"]
    assert main([*base, "--out", str(out)]) == 2
    assert "error: --out" in (err := capsys.readouterr().err) and "pass --overwrite to replace it" in err
    assert out.read_text() == "an earlier result\n"
    assert main([*base, "--out", str(tmp_path / "x.png"), "--plot-samples", "0", "--plot", str(tmp_path / "x.png")]) == 2
    assert "--plot" in capsys.readouterr().err and not (tmp_path / "x.png").exists()
    (tmp_path / "folder").mkdir()
    assert main([*base, "--out", str(tmp_path / "folder"), "--overwrite"]) == 2
    assert "error: --out" in (err := capsys.readouterr().err) and "is a folder; give the path of a file" in err
    for option, name in (("--plot", "x.npy"), ("--per-sample-out", "x.json")):  # never written as something else
        assert main([*base, "--out", str(tmp_path / "y.json"), "--plot-samples", "0", option, str(tmp_path / name)]) == 2
        assert f"error: {option} {tmp_path / name}: the file name must end in" in capsys.readouterr().err
    assert main([*base, "--out", str(out), "--overwrite"]) == 0
    assert '"splits"' in out.read_text()
    link = tmp_path / "link.npy"  # through a symbolic link: still the input
    link.symlink_to(u)
    assert main([*base, "--out", str(link), "--overwrite"]) == 2
    assert "is the input --unlearned" in capsys.readouterr().err


def test_quantize_into_its_own_model_folder_is_refused(tiny_model_dir, tmp_path, capsys):
    """The review's first severe finding: `attack quantize --model tq --out tq` replaced the weights."""
    before = _digest(tiny_model_dir)
    for out in (tiny_model_dir, tiny_model_dir / "int4"):
        assert main(["attack", "quantize", "--model", str(tiny_model_dir), "--bits", "4", "--out", str(out)]) == 2
        assert "--out" in capsys.readouterr().err
    assert _digest(tiny_model_dir) == before


def test_atomic_path_leaves_the_old_file_on_error(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("good")
    with pytest.raises(RuntimeError):
        with output_guard.atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("Ctrl-C")
    assert target.read_text() == "good" and os.listdir(tmp_path) == ["r.json"]
    output_guard.write_text(target, "new")
    assert target.read_text() == "new" and os.listdir(tmp_path) == ["r.json"]


@pytest.mark.parametrize("parse,text,message", [
    (positive_int, "0", "must be an integer >= 1, got 0"),
    (positive_int, "-1", "must be an integer >= 1, got -1"),
    (positive_int, "1.5", "must be an integer >= 1, got '1.5'"),
    (int_range(2), "1", "must be an integer >= 2, got 1"),
    (int_range(0, 10), "11", "must be an integer >= 0 and <= 10, got 11"),
    (float_range(0.0, low_open=True), "0", "must be a finite number > 0, got 0"),
    (float_range(0.0, low_open=True), "nan", "must be a finite number > 0, got nan"),
    (float_range(0.0, 1.0), "1.01", "must be a finite number >= 0 and <= 1, got 1.01"),
])
def test_range_types(parse, text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=message.replace("(", r"\(")):
        parse(text)


@pytest.mark.parametrize("argv,option", [
    (["klom", "--unlearned", "u", "--oracle", "o", "--out", "r.json", "--chunk-size", "0"], "--chunk-size"),
    (["klom", "--unlearned", "u", "--oracle", "o", "--out", "r.json", "--chunk-size", "-1"], "--chunk-size"),
    (["ulira", "--unlearned", "u", "--oracle", "o", "--out", "r.json", "--min-std", "0"], "--min-std"),
    (["ulira", "--unlearned", "u", "--oracle", "o", "--out", "r.json", "--folds", "1"], "--folds"),
    (["attack", "quantize", "--model", "m", "--bits", "4", "--group-size", "0", "--out", "q"], "--group-size"),
    (["attack", "relearn", "--model", "m", "--steps", "0", "--out", "r"], "--steps"),
    (["attack", "relearn", "--model", "m", "--relearn-fraction", "0", "--out", "r"], "--relearn-fraction"),
    (["run", "--model", "m", "--out", "o", "--epochs", "0"], "--epochs"),
    (["run", "--model", "m", "--out", "o", "--eval-every", "0"], "--eval-every"),
    (["margins", "--model", "m", "--data", "d", "--out", "o.npy", "--batch-size", "0"], "--batch-size"),
    (["ci", "--suite", "s", "--out", "o", "--limit", "0"], "--limit"),
    (["deep-unlearning", "sweep", "r", "--threshold", "2"], "--threshold"),
    (["watermark", "--id", "-1", "--model", "m", "--in", "i", "--out", "o"], "--id"),
])
def test_numeric_options_are_range_checked_at_parse_time(argv, option, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"argument {option}: must be" in err


def test_a_hub_id_is_not_a_local_input(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "suite.yaml").write_text("tasks: [t]\n")
    args = build_parser().parse_args(["ci", "--suite", "suite.yaml", "--model", "org/name", "--out", "org"])
    output_guard.check(args)  # no local folder org/name exists, so --out org holds no input
    (tmp_path / "org" / "name").mkdir(parents=True)
    with pytest.raises(output_guard.OutputClash, match="--out org holds the input --model org/name"):
        output_guard.check(args)


def test_every_seed_option_is_bounded_to_what_numpy_accepts(capsys):
    """numpy's seeds are 0 .. 2**32 - 1 (torch and Python take more): every ``--seed`` of every command, walked from
    the parser, refuses 2**32 and -1 in one line at parse time and takes 2**32 - 1."""
    import numpy as np

    np.random.seed(2**32 - 1)  # the bound is numpy's own
    with pytest.raises(ValueError):
        np.random.seed(2**32)
    seeded = [(words, a) for words, parser in _leaves(build_parser()) for a in parser._actions
              if "--seed" in a.option_strings]
    assert {" ".join(w) for w, _ in seeded} >= {"run", "attack relearn", "demo", "watermark"}
    for words, action in seeded:
        assert action.type(str(2**32 - 1)) == 2**32 - 1
        for bad in (str(2**32), "-1"):
            with pytest.raises(argparse.ArgumentTypeError) as e:
                action.type(bad)
            assert str(e.value) in (f"must be an integer >= 0 and <= 4294967295, got {bad}",
                                    f"must be >= 0 and <= 4294967295, got {bad}"), (words, str(e.value))
    with pytest.raises(SystemExit) as stop:
        main(["attack", "relearn", "--model", "m", "--out", "r", "--seed", str(2**32)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.splitlines()[-1] == (  # argparse: the usage, then one error line
        "unlearn attack relearn: error: argument --seed: must be an integer >= 0 and <= 4294967295, got 4294967296")


def test_report_plots_of_several_tasks_are_guarded_like_declared_outputs(tmp_path, capsys):
    """``report --plot fq.png`` with several tasks writes fq_<task>.png: each is checked against the inputs, the
    other outputs and existing files before anything is written."""
    import json
    import shutil

    from fixtures.runs import write_results

    metrics = {"tofu_forget01": {"forget_quality": 0.5, "model_utility": 0.6},
               "tofu_forget10": {"forget_quality": 0.1, "model_utility": 0.7}}
    run = write_results(tmp_path / "runs", metrics)
    plot, md = tmp_path / "fq.png", tmp_path / "report.md"
    precious = tmp_path / "fq_tofu_forget10.png"  # a run's results file under the name of a plot it would write
    shutil.copy(run, precious)
    before = _digest(precious)
    assert main(["report", str(precious), "--plot", str(plot), "--out", str(md)]) == 2
    err = capsys.readouterr().err
    assert err == (f"error: --plot {precious} is the input RUN {precious}; writing it would destroy that input. "
                   "Choose another --plot.\n")
    assert _digest(precious) == before and not md.exists()
    precious.unlink()
    earlier = tmp_path / "fq_tofu_forget01.png"  # an earlier report's plot: --overwrite replaces it
    earlier.write_bytes(b"an earlier plot")
    assert main(["report", str(run), "--plot", str(plot), "--out", str(md)]) == 2
    assert "error: --plot " + str(earlier) + " is an existing file; pass --overwrite" in capsys.readouterr().err
    assert earlier.read_bytes() == b"an earlier plot" and not md.exists()
    out_md = tmp_path / "fq_tofu_forget10.png"  # another output of the same command on a plot's path
    assert main(["report", str(run), "--plot", str(plot), "--out", str(out_md), "--overwrite"]) == 2
    assert f"error: --plot {out_md} is also --out; give each output its own path." in capsys.readouterr().err
    assert not out_md.exists() and earlier.read_bytes() == b"an earlier plot"
    assert main(["report", str(run), "--plot", str(plot), "--json", str(tmp_path / "r.json"), "--overwrite"]) == 0
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.glob("fq*")) == ["fq_tofu_forget01.png", "fq_tofu_forget10.png"]
    assert earlier.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and json.loads((tmp_path / "r.json").read_text())


def test_klom_default_plot_is_guarded_like_a_declared_output(tmp_path, capsys):
    """``klom --plot-samples`` without ``--plot`` writes OUT with .png: an existing one needs --overwrite."""
    import numpy as np

    u, o, out, png = tmp_path / "u.npy", tmp_path / "o.npy", tmp_path / "r.json", tmp_path / "r.png"
    np.save(u, np.zeros((2, 4)))
    np.save(o, np.ones((2, 4)))
    png.write_bytes(b"an earlier plot")
    base = ["klom", "--unlearned", str(u), "--oracle", str(o), "--quiet", "--out", str(out), "--plot-samples", "0"]
    assert main(base) == 2
    assert f"error: --plot {png} is an existing file; pass --overwrite" in capsys.readouterr().err
    assert png.read_bytes() == b"an earlier plot" and not out.exists()
    assert main([*base, "--overwrite"]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG" and out.exists()


PROTECTED_CASES = [(name, out) for name, _, decl in WRITING for out in decl.outputs if out not in decl.prefixes]


@pytest.mark.parametrize("command,output", PROTECTED_CASES, ids=[f"{c}:{o}" for c, o in PROTECTED_CASES])
def test_the_working_folder_its_parents_and_home_are_never_outputs(command, output, tmp_path, monkeypatch, capsys):
    """`unlearn run --out . --overwrite` deleted the working folder's other files: every output of every writing
    command refuses the working folder, a folder holding it and the home folder, with or without --overwrite."""
    parser, decl = next((p, d) for n, p, d in WRITING if n == command)
    home = tmp_path / "home"
    work = home / "work"
    work.mkdir(parents=True)
    (work / "precious.txt").write_text("mine")
    filler = tmp_path / "other_input.json"
    filler.write_text('{"other": true}\n')
    free = tmp_path / "free"
    free.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(home))
    overwrite = any("--overwrite" in a.option_strings for a in parser._actions)
    for given in (".", "..", "~", str(work), "/"):
        for extra in (["--overwrite"] if overwrite else []), []:
            argv = _argv(command, parser, {output: given}, str(filler), str(free)) + extra
            assert main(argv) == 2, argv
            err = capsys.readouterr().err
            assert err.startswith("error: ") and err.count("\n") == 1, err
            assert "working folder" in err or "home folder" in err, err
    assert os.listdir(work) == ["precious.txt"] and os.listdir(free) == []
