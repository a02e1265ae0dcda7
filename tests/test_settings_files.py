"""Every settings file goes through one reader (unlearn_tasks.settings): the sweep spec, the CI suite, `unlearn run
--config` and the task metadata they carry. Each is fed a duplicate key, non-UTF-8 bytes, deep nesting, an alias
bomb and a value of the wrong type: the command exits 2 with one line ``error: FILE:LINE: ...`` and writes nothing.
"""

from __future__ import annotations

import json

import pytest

from unlearn_app.ci.suite import parse_suite
from unlearn_app.cli import main
from unlearn_app.sweep.spec import SpecError, parse_spec
from unlearn_methods.config import load_run_config
from unlearn_tasks.settings import MAX_DEPTH, SettingsError, parse_settings

TASK = "tofu_forget01"
SPEC = f"""model: m
data: demo
forget: forget01
methods:
  graddiff: {{}}
evaluation:
  tasks: [{TASK}]
  metadata: {{max_items_per_split: 2}}
"""
SUITE = f"""tasks: [{TASK}]
checks:
  - {TASK}/forget_quality >= 0.05
metadata: {{max_items_per_split: 2}}
"""
CONFIG = """method: ga
model: m
epochs: 1
eval_metadata: {max_items_per_split: 2}
"""
#: Each reader: its valid file, the command reading a file, and a value of the wrong type (text replaced, line).
READERS = {
    "sweep spec": (SPEC, lambda f, out, tmp: ["sweep", str(f), "--out", str(out)],
                   ("forget: forget01", "forget: [1, {a: 2}]", "forget"), 3),
    "CI suite": (SUITE, lambda f, out, tmp: ["ci", "--suite", str(f), "--from-results", str(tmp / "results"),
                                                "--out", str(out)],
                 ("checks:", "limit: ten\nchecks:", "limit"), 2),
    "run --config": (CONFIG, lambda f, out, tmp: ["run", "--config", str(f), "--out", str(out)],
                     ("epochs: 1", "epochs: many", "epochs"), 3),
}
BOMB = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}' if i else 'x'] * 10)}]\n" for i in range(9))


def _cases(valid: str, wrong: tuple[str, str, str], wrong_line: int) -> dict[str, tuple[bytes, int, str]]:
    """Bad variants of ``valid``: (file bytes, the line the error names, a part of the message)."""
    lines = valid.splitlines()
    metadata = next(i for i, t in enumerate(lines, 1) if "metadata" in t)
    nested_dup = valid.replace("{max_items_per_split: 2}", "{max_items_per_split: 2, max_items_per_split: 3}")
    top_dup = valid + lines[0] + "\n"
    deep = valid + "extra: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n"
    old, new, wrong_key = wrong
    assert old in valid
    return {
        "duplicate top-level key": (top_dup.encode(), len(lines) + 1, f"given twice (lines 1 and {len(lines) + 1})"),
        "duplicate nested key": (nested_dup.encode(), metadata, "given twice"),
        "non-UTF-8": (("# caf\xe9\n" + valid).encode("latin-1"), 1, "is not UTF-8"),
        "deep nesting": (deep.encode(), len(lines) + 1, "nested too deeply"),
        "alias bomb": (("defs:\n  " + BOMB.replace("\n", "\n  ").rstrip() + "\n" + valid).encode(), 1,
                       "more than 10000 values"),
        "wrong type": (valid.replace(old, new).encode(), wrong_line, f"{wrong_key}: "),
    }


@pytest.mark.parametrize("reader", list(READERS))
def test_every_settings_file_reader_refuses_bad_files_in_one_line_writing_nothing(reader, tmp_path, capsys):
    valid, command, wrong_key, wrong_line = READERS[reader]
    (tmp_path / "results").mkdir()  # an input folder of its own (an output inside an input is refused first)
    for case, (content, line, part) in _cases(valid, wrong_key, wrong_line).items():
        path = tmp_path / f"{case.replace(' ', '_')}.yaml"
        path.write_bytes(content)
        out = tmp_path / f"out_{case.replace(' ', '_')}"
        assert main(command(path, out, tmp_path)) == 2, (reader, case)
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, (reader, case, err)
        assert err.startswith(f"error: {path}:{line}: "), (reader, case, err)
        assert part in err, (reader, case, err)
        assert not out.exists(), (reader, case)


def test_the_valid_files_are_read():
    """The walking test's files are good ones but for the change each case makes."""
    assert [t.method for t in parse_spec(SPEC).trials] == ["graddiff"]
    assert parse_suite(SUITE).metadata == {"max_items_per_split": 2}
    assert parse_settings(CONFIG).data["eval_metadata"] == {"max_items_per_split": 2}


def test_duplicate_keys_name_both_lines_at_any_depth():
    with pytest.raises(SettingsError, match=r"^s.yaml:4: a.b.c: given twice \(lines 3 and 4\); keep one$"):
        parse_settings("a:\n  b:\n    c: 1\n    c: 2\n", "s.yaml")
    with pytest.raises(SettingsError, match=r"^s.yaml:4: x.1.k: given twice \(lines 3 and 4\)"):
        parse_settings("x:\n  - {k: 1}\n  - k: 1\n    k: 2\n", "s.yaml")
    # a merge key adds the keys a mapping does not give itself: not a duplicate
    assert parse_settings("d: &d {a: 1, b: 2}\ne:\n  <<: *d\n  a: 3\n").data["e"] == {"a": 3, "b": 2}


def test_a_method_given_twice_under_two_spellings_is_refused():
    text = SPEC.replace("  graddiff: {}\n", "  ga: {}\n  GA: {}\n")
    with pytest.raises(SpecError, match=r"^s.yaml:6: methods.GA: the same method as ga \(lines 5 and 6\)"):
        parse_spec(text, "s.yaml")
    text = SPEC.replace("  graddiff: {}\n", "  graddiff: {}\n  graddiff: {grid: {lr: [1e-4]}}\n")
    with pytest.raises(SpecError, match=r"^s.yaml:6: methods.graddiff: given twice \(lines 5 and 6\)"):
        parse_spec(text, "s.yaml")


def test_a_suite_with_checks_twice_is_refused_not_the_last_kept():
    text = f"tasks: [{TASK}]\nchecks: [{TASK}/forget_quality >= 0.99]\nchecks: [{TASK}/forget_quality >= 0]\n"
    with pytest.raises(SettingsError, match=r"s.yaml:3: checks: given twice \(lines 2 and 3\)"):
        parse_suite(text, "s.yaml")


def test_numbers_read_the_same_in_a_grid_a_random_space_and_a_run_config(tmp_path):
    """YAML 1.1 reads 1e-5 as text (1.0e-5 as a number); the reader reads both as YAML 1.2 does: numbers."""
    assert parse_settings("a: 1e-5\nb: 1.0e-5\nc: 5E3\nd: -2e+1\ne: .5\nf: 1_000\ng: '1e-5'\nh: 1e5x\n").data == {
        "a": 1e-5, "b": 1e-5, "c": 5000.0, "d": -20.0, "e": 0.5, "f": 1000, "g": "1e-5", "h": "1e5x"}
    space = SPEC.replace("graddiff: {}", "graddiff: {random: {trials: 3, space: {lr: {low: 1e-5, high: 1e-3, "
                                         "log: true}}}}")
    for trial in parse_spec(space).trials:
        assert 1e-5 <= trial.run["lr"] <= 1e-3
    grid = parse_spec(SPEC.replace("graddiff: {}", "graddiff: {grid: {lr: [1e-5, 2.5e-4]}}")).trials
    assert [t.run["lr"] for t in grid] == [1e-5, 2.5e-4]
    cfg = tmp_path / "c.yaml"
    cfg.write_text("method: ga\nmodel: m\nout: o\nlr: 3e-5\n")
    assert load_run_config(cfg).lr == 3e-5


def test_run_config_errors_name_the_file_line_and_key(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("method: ga\nmodel: m\nout: o\nlr: -1\n")
    with pytest.raises(SettingsError, match=rf"^{cfg}:4: lr: must be positive, got -1.0$"):
        load_run_config(cfg)
    cfg.write_text("method: ga\nmodel: m\nlearning_rate: 1\n")
    with pytest.raises(SettingsError, match=rf"^{cfg}:3: learning_rate: unknown option.*; the options are method,"):
        load_run_config(cfg)


def test_task_metadata_on_the_command_line_refuses_a_key_twice(tmp_path, capsys):
    metadata = json.dumps({"a": 1}).replace("}", ', "a": 2}')
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        main(["run", "--method", "ga", "--model", "m", "--out", str(out), "--eval-metadata", metadata])
    assert e.value.code == 2 and "gives the key 'a' twice" in capsys.readouterr().err and not out.exists()
