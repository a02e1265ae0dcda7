"""Reading an untrusted submission folder: only relative names made of plain parts, only regular files inside the
folder, never through a symbolic link, and JSON parsed so that any bad content is one :class:`Unreadable` line.

A name is checked (:func:`name_problem`) before anything is read, so nothing outside the folder is opened or probed
(an absolute path or a ``..`` is refused as text). A symbolic link anywhere in the folder (the folder
itself, a folder or file inside it, listed or not) is refused, never followed (:func:`first_link`); every part of a
listed path is looked at again with ``lstat`` when it is read, and the read itself opens one part at a time with
``O_NOFOLLOW`` (:func:`open_no_follow`): a link made after the walk is refused at read time.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any

#: One part of a listed path: letters, digits, ``.``, ``_``, ``-``; not starting with ``.`` (no ``..``, no hidden file).
PART = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,199}")
#: What a listed file may be (per-item values: JSON, and lm-eval's JSON-lines samples): nothing a browser runs.
SUFFIXES = (".json", ".jsonl")
#: A task name: lm-eval's kind of name, one path part (no ``/``, no ``..``).
TASK = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
#: Largest file read from a submission (bytes).
MAX_BYTES = 512 * 2**20


class Unreadable(ValueError):
    """A listed file that cannot be read safely, or is not what it should be; the message is one line."""


class Unsafe(Unreadable):
    """A symbolic link where a submission must hold a regular file or folder."""


def is_plain(rel: Any) -> bool:
    """``rel`` is a relative POSIX path of plain parts (:data:`PART`): not absolute, no ``..``, no hidden part."""
    return isinstance(rel, str) and bool(rel) and all(PART.fullmatch(p) for p in rel.split("/"))


def name_problem(rel: Any) -> str | None:
    """Why ``rel`` may not name a file of a submission (None when it may): it must be a relative POSIX path of plain
    parts (:data:`PART`) ending in one of :data:`SUFFIXES`."""
    if not isinstance(rel, str) or not rel:
        return f"{rel!r} is not a file name"
    if rel.startswith(("/", "\\")) or re.match(r"[A-Za-z]:", rel):
        return f"{rel!r} is an absolute path; name files relative to the submission folder"
    parts = rel.split("/")
    if ".." in parts:
        return f"{rel!r} leads out of the submission folder (..)"
    if not is_plain(rel):
        return f"{rel!r} is not a plain relative path (letters, digits, . _ - and /)"
    if not rel.endswith(SUFFIXES):
        return f"{rel!r} is not a {' or '.join(SUFFIXES)} file; a submission holds only its per-item values"
    return None


def first_link(folder: Path) -> str | None:
    """The first symbolic link in ``folder`` (``folder`` itself included), relative to it, without following any;
    None when there is none."""
    if folder.is_symlink():
        return "the submission folder"
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in sorted(dirs + files):
            if (Path(root) / name).is_symlink():
                rel = (Path(root) / name).relative_to(folder).as_posix()
                return rel if is_plain(rel) else repr(rel[:200])
    return None


def regular_file(folder: Path, rel: str) -> Path:
    """``folder/rel`` when every part of it, ``folder`` included, is no symbolic link and it is a regular file;
    :class:`Unreadable` otherwise. ``rel`` must have passed :func:`name_problem`."""
    path = folder
    for part in ("", *rel.split("/")):
        path = path / part if part else path
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            raise Unreadable(f"{rel} is missing") from None
        except OSError as e:
            raise Unreadable(f"{rel} cannot be read ({type(e).__name__})") from None
        if stat.S_ISLNK(mode):
            where = "the submission folder" if path == folder else rel
            raise Unsafe(f"{where} is a symbolic link; a submission holds regular files only")
    if not stat.S_ISREG(mode):
        raise Unreadable(f"{rel} is not a regular file")
    return path


def open_no_follow(folder: Path, rel: str) -> int:
    """A read-only descriptor of the regular file ``folder/rel``, opened one part at a time from ``folder``, each
    part with ``O_NOFOLLOW`` relative to the folder opened before it: a symbolic link anywhere on the way, ``folder``
    itself included, is refused (:class:`Unsafe`) even when it appeared after every earlier look; what is opened is
    checked to be a regular file (a FIFO or device swapped in is not read)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    parts = rel.split("/")
    by_part = os.open in os.supports_dir_fd
    fds: list[int] = []
    try:
        try:
            if not by_part:  # no openat (Windows): the whole path, its last part not followed
                fds.append(os.open(Path(folder, *parts), flags | getattr(os, "O_NONBLOCK", 0)))
            else:
                fds.append(os.open(folder, flags | getattr(os, "O_DIRECTORY", 0)))
                for part in parts[:-1]:
                    fds.append(os.open(part, flags | getattr(os, "O_DIRECTORY", 0), dir_fd=fds[-1]))
                fds.append(os.open(parts[-1], flags | getattr(os, "O_NONBLOCK", 0), dir_fd=fds[-1]))
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.EMLINK) or _is_link_on_the_way(folder, parts):
                raise Unsafe(f"{rel} (or a folder on its way) is a symbolic link; a submission holds regular files "
                             "only") from None
            raise Unreadable(f"{rel} cannot be read ({type(e).__name__})") from None
        if not stat.S_ISREG(os.fstat(fds[-1]).st_mode):
            raise Unreadable(f"{rel} is not a regular file")
        return fds.pop()
    finally:
        for fd in fds:
            os.close(fd)


def _is_link_on_the_way(folder: Path, parts: list[str]) -> bool:
    path = Path(folder)
    for part in ("", *parts):
        path = path / part if part else path
        if path.is_symlink():
            return True
    return False


def read_bytes(folder: Path, rel: str) -> bytes:
    """The bytes of the listed file ``rel`` of ``folder``: looked at with ``lstat`` (:func:`regular_file`), then
    opened without following a link (:func:`open_no_follow`), so a link made between the two is refused too."""
    regular_file(folder, rel)
    with os.fdopen(open_no_follow(folder, rel), "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise Unreadable(f"{rel} is larger than {MAX_BYTES // 2**20} MiB")
    return data


def parse_json(data: bytes, rel: str, kind: type = dict) -> Any:
    """``data`` as JSON of type ``kind``; :class:`Unreadable` (one line) when it is not UTF-8, not JSON, nested too
    deeply, holds a number too large for a float, or is of another type."""
    def no_huge(text: str) -> float:
        value = float(text)
        if value in (float("inf"), float("-inf")):
            raise ValueError(f"the number {text[:20]}... is too large")
        return value

    def whole(text: str) -> int | float:
        return int(text) if len(text.lstrip("-")) <= 300 else no_huge(text)

    def constant(text: str) -> float:
        raise ValueError(f"{text} is not a number JSON allows")

    try:
        value = json.loads(data.decode("utf-8"), parse_int=whole, parse_float=no_huge,
                           parse_constant=constant)
    except UnicodeDecodeError:
        raise Unreadable(f"{rel} is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise Unreadable(f"{rel} is not valid JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise Unreadable(f"{rel} is nested too deeply to be read") from None
    except ValueError as e:
        raise Unreadable(f"{rel}: {e}") from None
    if not isinstance(value, kind):
        raise Unreadable(f"{rel} is a JSON {type(value).__name__}, not a JSON {'object' if kind is dict else kind.__name__}")
    return value


def read_json(folder: Path, rel: str, kind: type = dict) -> Any:
    """The listed JSON file ``rel`` of ``folder``, read safely (:func:`read_bytes`, :func:`parse_json`)."""
    return parse_json(read_bytes(folder, rel), rel, kind)
