"""No command overwrites its own input: the one output guard of every ``unlearn`` command that writes.

A command declares on its parser which options are inputs and which are outputs (:func:`declare`); before the
command's function runs, :func:`check` (called by :func:`unlearn_app.cli.main`) compares every output path with
every input path, after resolving ``~`` and symbolic links, either way round:

* an output that *is* an input, lies *inside* an input folder (a model folder, say), or *holds* an input (a folder
  that would be replaced) is refused;
* inputs that are folders *scanned* for some files (run folders, read for ``results*.json`` and open-unlearning's
  ``*_EVAL.json`` / ``*_SUMMARY.json``) may hold file outputs, except ones whose name matches what is read there,
  and folder outputs only when the command declares the folder's ``contents`` and none of them is read there;
* no output is the working folder, the home folder, or a folder holding either (``--out .``, ``--out ~``), with or
  without ``--overwrite``;
* an output that already exists (a non-empty file, or a folder with anything in it) needs ``--overwrite``
  (commands with their own rule for an existing output, such as ``unlearn run --resume``, opt out);
* two outputs of one command may not be the same path.

Any of these stops the command with a one-line ``error: ...`` naming both options (exit 2), before any work.
A command whose output option names further files known only once its inputs are read (``report --plot`` writes one
plot per task) passes them to :func:`check` before writing anything.
:func:`atomic_path` is how a command writes a file: to a temporary name beside it, renamed into place when
complete, so a crash or Ctrl-C never leaves a half-written file where a good one was.
:func:`replaced_folder` is how a command replaces a folder as a whole (``--overwrite``): written beside it, then
renamed into place, so no file of the earlier folder survives.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: File suffixes matplotlib writes (for plot outputs).
IMAGE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")
#: What is read from a run folder (scanned): lm-eval results files and open-unlearning evaluation files.
RUN_FILES = ("results*.json", "*_EVAL.json", "*_SUMMARY.json")
#: Where a parser's declaration is kept (``set_defaults``), so the walking test and :func:`check` can read it.
KEY = "_output_guard"


class OutputClash(ValueError):
    """An output that would destroy an input or an existing result; the message says what to pass instead."""


@dataclass(frozen=True)
class Declaration:
    """Which options of one command name inputs and outputs (argparse ``dest`` names)."""

    outputs: tuple[str, ...]
    inputs: tuple[str, ...] = ()
    #: dest -> file patterns read from that folder (an output inside it may not match one).
    scanned: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: dest -> suffixes of an output prefix (``--out report`` writes report.md, report.json, ...; see
    #: :func:`prefix_base`); the file name used when the prefix is a folder is ``folder_names[dest]``.
    prefixes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    folder_names: dict[str, str] = field(default_factory=dict)
    #: Outputs that are folders; every other output is a file (an existing folder there is refused).
    folders: tuple[str, ...] = ()
    #: dest -> the file suffixes that output may have (``--plot x.npy`` is refused, not written as something else).
    suffixes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Whether an existing output needs ``--overwrite`` (False: the command has its own rule).
    existing_needs_overwrite: bool = True
    #: dest -> suffix of the sibling folder the output is written in before it is renamed into place
    #: (``unlearn run --out X`` trains in ``X.partial``): checked against the inputs like the output itself.
    siblings: dict[str, str] = field(default_factory=dict)
    #: dest -> how messages name the option (``--out``, or the metavar of a positional argument).
    names: dict[str, str] = field(default_factory=dict)
    #: dest -> what a folder output holds once written (paths relative to it, ``*`` for any name): a folder output
    #: inside a scanned input is allowed only when none of these is what is read there.
    contents: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def name(self, dest: str) -> str:
        return self.names.get(dest, "--" + dest.replace("_", "-"))


def declare(parser: argparse.ArgumentParser, outputs: Sequence[str], inputs: Sequence[str] = (), *,
            scanned: dict[str, Sequence[str]] | None = None, prefixes: dict[str, Sequence[str]] | None = None,
            folder_names: dict[str, str] | None = None, folders: Sequence[str] = (),
            suffixes: dict[str, Sequence[str]] | None = None, existing_needs_overwrite: bool = True,
            siblings: dict[str, str] | None = None, contents: dict[str, Sequence[str]] | None = None) -> None:
    """Declare a command's outputs and inputs (``dest`` names); adds ``--overwrite`` if the parser has none."""
    names = {a.dest: (next((o for o in a.option_strings if o.startswith("--")), None) or str(a.metavar or a.dest))
             for a in parser._actions}
    declared = [*outputs, *inputs, *(scanned or {}), *folders, *(suffixes or {}), *(siblings or {}), *(contents or {})]
    unknown = [d for d in declared if d not in names]
    if unknown:
        raise ValueError(f"output guard: the parser has no option with dest {unknown}")
    decl = Declaration(tuple(outputs), tuple(inputs), {k: tuple(v) for k, v in (scanned or {}).items()},
                       {k: tuple(v) for k, v in (prefixes or {}).items()}, dict(folder_names or {}), tuple(folders),
                       {k: tuple(v) for k, v in (suffixes or {}).items()}, existing_needs_overwrite,
                       dict(siblings or {}), names, {k: tuple(v) for k, v in (contents or {}).items()})
    parser.set_defaults(**{KEY: decl})
    if existing_needs_overwrite and not any("--overwrite" in a.option_strings for a in parser._actions):
        parser.add_argument("--overwrite", action="store_true",
                            help="Replace outputs that already exist (never an input of this command).")


def _paths(value: Any) -> list[str]:
    """The paths an option's value names: a string, a list of them, and the PATH of ``NAME=PATH``."""
    if value is None or isinstance(value, bool):
        return []
    if isinstance(value, (list, tuple)):
        return [p for v in value for p in _paths(v)]
    text = str(value)
    if not text:
        return []
    paths = [text]
    if "=" in text and not Path(text).exists():
        paths.append(text.split("=", 1)[1])
    return paths


def _resolved(path: str) -> Path:
    return Path(path).expanduser().resolve()


def _inside(child: Path, parent: Path) -> bool:
    return child != parent and child.is_relative_to(parent)


def _non_empty(path: Path) -> bool:
    if path.is_dir():
        return any(path.iterdir())
    return path.exists() and (not path.is_file() or path.stat().st_size > 0)


def prefix_base(given: str, folder_name: str = "report") -> Path:
    """Where an output prefix points: ``given``, or ``given/folder_name`` when ``given`` is an existing folder or ends
    with a path separator (``--out reports/`` writes ``reports/attack_report.md``, not ``reports.md`` beside it).
    The command adds its suffixes with ``Path.with_suffix``."""
    if given.endswith(("/", os.sep)) or Path(given).expanduser().is_dir():
        return Path(given).expanduser() / folder_name
    return Path(given).expanduser()


def _output_paths(decl: Declaration, args: argparse.Namespace) -> list[tuple[str, str, Path, bool]]:
    """(option, path, resolved, is a file written) of every output; a prefix gives each file it names, and
    itself (checked against the inputs only); a folder written in a sibling first gives that sibling too (checked
    against the inputs only)."""
    out = []
    for dest in decl.outputs:
        for given in _paths(getattr(args, dest, None)):
            if dest in decl.siblings:
                sibling = os.path.abspath(os.path.expanduser(given)) + decl.siblings[dest]
                out.append((decl.name(dest), sibling, _resolved(sibling), False))
            if dest not in decl.prefixes:
                out.append((decl.name(dest), given, _resolved(given), True))
                continue
            out.append((decl.name(dest), given, _resolved(given), False))
            base = prefix_base(given, decl.folder_names.get(dest, "report"))
            for suffix in decl.prefixes[dest]:
                path = base.with_suffix(suffix)
                out.append((decl.name(dest), str(path), _resolved(str(path)), True))
    return out


def check(args: argparse.Namespace, derived: Sequence[tuple[str, str | os.PathLike]] = (),
          inputs: Sequence[tuple[str, str | os.PathLike]] = ()) -> None:
    """Refuse (:class:`OutputClash`) outputs that clash with inputs, with each other, or with existing results.

    ``derived``: ``(dest, path)`` of files an output option writes that are known only once the inputs are read
    (``report --plot p.png`` with several tasks writes ``p_<task>.png``); the command calls this again with them,
    before it writes anything, and they are checked like the declared outputs. ``inputs``: ``(what, path)`` of
    inputs named inside an input file (``unlearn sweep``'s spec names its models and data; ``what`` is how the
    message names it), checked like the declared inputs."""
    decl: Declaration | None = getattr(args, KEY, None)
    if decl is None:
        return
    outputs = _output_paths(decl, args) + [(decl.name(dest), str(path), _resolved(str(path)), True)
                                           for dest, path in derived]
    for out_opt, out_given, out, written in outputs:
        why = _protected(out) if written else None
        if why:
            raise OutputClash(f"{out_opt} {out_given} {why}; an output there would be written among (or replace) "
                              f"everything else in it. Choose a folder of its own, e.g. {out_opt} results/run1.")
    folder_dests = {decl.name(d): d for d in decl.folders}
    declared = [(decl.name(d), decl.scanned.get(d), given, _resolved(given)) for d in (*decl.inputs, *decl.scanned)
                for given in _paths(getattr(args, d, None)) if Path(given).expanduser().exists()]
    named = [(what, None, str(given), _resolved(str(given))) for what, given in inputs
             if Path(given).expanduser().exists()]  # a Hub id names no local path
    for out_opt, out_given, out, _ in outputs:
        for in_opt, patterns, in_given, inp in declared + named:
            if out == inp:
                why = f"is the input {in_opt} {in_given}"
            elif _inside(inp, out):
                why = f"holds the input {in_opt} {in_given}"
            elif _inside(out, inp) and patterns is None:
                why = f"lies inside the input {in_opt} {in_given}"
            elif _inside(out, inp) and any(fnmatch.fnmatch(out.name, p) for p in patterns or ()):
                why = f"would be read as an input from {in_opt} {in_given} (it matches {' or '.join(patterns or ())})"
            elif _inside(out, inp) and out_opt in folder_dests and _read_back(decl, folder_dests[out_opt], patterns):
                raise OutputClash(f"{out_opt} {out_given} lies inside the input {in_opt} {in_given}, which is searched "
                                  f"for {' and '.join(patterns or ())}: what it writes there would be read as input "
                                  f"next time. Choose an {out_opt} outside {in_given}.")
            else:
                continue
            raise OutputClash(f"{out_opt} {out_given} {why}; writing it would destroy that input. "
                              f"Choose another {out_opt}.")
    seen: dict[Path, str] = {}
    for out_opt, out_given, out, written in outputs:
        if not written:
            continue
        if out in seen and seen[out] != out_opt:
            raise OutputClash(f"{out_opt} {out_given} is also {seen[out]}; give each output its own path.")
        seen[out] = out_opt
    for dest in decl.outputs:  # a file output must be a file of the declared kind
        for given in _paths(getattr(args, dest, None)):
            if dest not in decl.folders and dest not in decl.prefixes and Path(given).expanduser().is_dir():
                raise OutputClash(f"{decl.name(dest)} {given} is a folder; give the path of a file.")
            allowed = decl.suffixes.get(dest)
            if allowed and Path(given).suffix.lower() not in allowed:
                raise OutputClash(f"{decl.name(dest)} {given}: the file name must end in {' or '.join(allowed)}.")
    if decl.existing_needs_overwrite and not getattr(args, "overwrite", False):
        for out_opt, out_given, out, written in outputs:
            if written and _non_empty(out):
                kind = "a non-empty folder" if out.is_dir() else "an existing file"
                raise OutputClash(f"{out_opt} {out_given} is {kind}; pass --overwrite to replace it, or choose "
                                  f"another {out_opt}.")


def _protected(path: Path) -> str | None:
    """Why ``path`` may never be an output: the working folder, the home folder, or a folder holding either."""
    for name, where in (("working folder", Path.cwd), ("home folder", Path.home)):
        try:
            folder = where().resolve()
        except (OSError, RuntimeError):  # a working folder that was deleted, no home folder
            continue
        if path == folder:
            return f"is the {name}"
        if _inside(folder, path):
            return f"holds the {name} {folder}"
    return None


def _read_back(decl: Declaration, dest: str, patterns: tuple[str, ...] | None) -> bool:
    """Whether a folder output ``dest`` placed inside a scanned input would hold a file read from it: always, unless
    the command declares the folder's ``contents`` and none of them matches ``patterns``."""
    contents = decl.contents.get(dest)
    if contents is None:
        return True
    return any(fnmatch.fnmatch(Path(c).name, p) or fnmatch.fnmatch(p, Path(c).name)
               for c in contents for p in patterns or ())


@contextlib.contextmanager
def replaced_folder(path: str | os.PathLike) -> Iterator[Path]:
    """A new empty folder beside ``path`` to write into; when the block ends without error it replaces ``path`` as
    a whole (nothing of an earlier folder there is kept), and otherwise it is removed and ``path`` is left as it
    was."""
    import shutil

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = path.with_name(f".{path.name}.new-{os.getpid()}")
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    shutil.rmtree(new, ignore_errors=True)
    new.mkdir()
    try:
        yield new
        if path.exists():
            os.replace(path, old)
        os.replace(new, path)
    finally:
        shutil.rmtree(new, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` (same suffix, so writers that look at it behave the same) that is renamed to
    ``path`` when the block ends without error, and removed otherwise."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp-{os.getpid()}{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` through :func:`atomic_path`."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
