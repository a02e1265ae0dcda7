"""What the site publishes, and how a build replaces the previous one in ``--out``.

:func:`publish` copies a submission's ``submission.json`` and the files it lists (each a regular file inside the
folder, read without following links, with the sha256 it had when validation read it) and nothing else: an extra
file, a symbolic link, a file whose hash differs from the record's, or any file changed after validation is not
copied. :func:`install` moves a site built in a staging folder
into ``--out`` and removes the files the previous build wrote that this one did not (a submission no longer on the
board); it knows them from :data:`MANIFEST`, the list of files each build writes, so a file the builder did not write
is never removed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from unlearn_app.leaderboard import untrusted
from unlearn_app.leaderboard.submission import sha256
from unlearn_app.leaderboard.validate import Check

#: The list of files the last build wrote, relative to ``--out``.
MANIFEST = ".leaderboard-files.json"


def publish(check: Check, out: str | Path) -> list[str]:
    """Copy the files of ``check``'s submission that validation read (``submission.json`` and the listed files whose
    hash matched) into ``out``, each only when its bytes still have the sha256 they had then; the relative paths
    copied, sorted."""
    if check.refused or check.record is None:
        return []
    folder, out = Path(check.folder), Path(out)
    done = []
    for rel, validated in sorted(check.hashes.items()):
        if untrusted.name_problem(rel):
            continue
        try:
            data = untrusted.read_bytes(folder, rel)
        except untrusted.Unreadable:
            continue
        if sha256(data) != validated:  # changed since it was validated
            continue
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(data)
        done.append(rel)
    return done


def built_files(out: Path) -> list[str]:
    """The files of the last build in ``out`` (:data:`MANIFEST`; empty when there is none or it is unreadable)."""
    try:
        names = json.loads((out / MANIFEST).read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return []
    return [n for n in names if untrusted.is_plain(n)] if isinstance(names, list) else []


def _links(out: Path, rel: str) -> list[Path]:
    """The symbolic links on the way from ``out`` to ``out/rel``."""
    path, found = out, []
    for part in rel.split("/"):
        path = path / part
        if path.is_symlink():
            found.append(path)
            break
    return found


def install(staging: Path, out: Path) -> tuple[list[str], list[str]]:
    """Move every file of ``staging`` (a fresh build) into ``out`` and remove the previous build's files that this
    one did not write; ``(written, removed)`` relative paths. Only files are removed, never through a link."""
    written = sorted(p.relative_to(staging).as_posix() for p in staging.rglob("*") if p.is_file())
    removed = []
    for rel in sorted(set(built_files(out)) - set(written)):
        if not _links(out, rel) and (out / rel).is_file():
            (out / rel).unlink()
            removed.append(rel)
            _prune((out / rel).parent, out)
    for rel in written:
        for link in _links(out, rel):  # written in place of a link, never through it
            link.unlink()
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir():
            shutil.rmtree(target)
        os.replace(staging / rel, target)
    (out / MANIFEST).write_text(json.dumps(written, indent=0) + "\n")
    return written, removed


def _prune(folder: Path, out: Path) -> None:
    """Remove ``folder`` and its parents up to ``out`` while they are empty."""
    while folder != out and out in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        folder = folder.parent
