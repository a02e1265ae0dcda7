"""The judge's verdict cache: the judge's raw reply per (judge id and revision, prompt name and sha256, whether the
judge's chat template was applied, question, ground truth, answer), so a rerun of ``unlearn judge`` asks nothing it
asked before. One JSON line per reply in ``verdicts.jsonl`` under ``$UNLEARN_JUDGE_CACHE``, else
``$XDG_CACHE_HOME/lm-eval-unlearning/judge`` (``~/.cache/lm-eval-unlearning/judge``).

Lines are only appended, under an exclusive lock, each reply at most :data:`MAX_REPLY_CHARS` characters. The file
itself is never a symbolic link (it is opened without following one; folders above it may be links). A last line
cut by a crash mid-write is dropped from the file, with a note, before anything is appended after it; any other
line that does not read is skipped."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

FILE = "verdicts.jsonl"
#: The longest reply kept (characters): a longer one is kept cut to this length, in the cache and the samples file.
#: A verdict needs one word (yes-no) or a short JSON summary after about 512 tokens of reasoning (ou-pr133).
MAX_REPLY_CHARS = 32_768

try:
    import fcntl
except ImportError:  # not POSIX: appends are whole lines, but not locked against another process
    fcntl = None


class CacheError(ValueError):
    """A cache file that cannot be used; the one-line message names it and what to do."""


def cache_dir() -> Path:
    given = os.environ.get("UNLEARN_JUDGE_CACHE")
    if given:
        return Path(given).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lm-eval-unlearning" / "judge"


def key(judge: Mapping[str, str], prompt: Mapping[str, str], chat: bool, question: str, ground_truth: str,
        answer: str) -> str:
    """The sha256 naming one question to the judge."""
    parts = [judge["model"], judge["revision"], prompt["name"], prompt["sha256"], chat, question, ground_truth, answer]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


def _open(path: Path, flags: int) -> int:
    """A descriptor of the regular file ``path``, never through a symbolic link (and never blocking on a FIFO)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), 0o644)
    except OSError as e:
        if path.is_symlink():
            raise CacheError(f"the judge cache {path} is a symbolic link; it is never followed: remove the link or "
                             "give another --cache-dir") from None
        raise CacheError(f"the judge cache {path} cannot be opened ({e.strerror}); give another --cache-dir") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise CacheError(f"the judge cache {path} is not a regular file; remove it or give another --cache-dir")
    return fd


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


class VerdictCache:
    """The replies cached in ``folder`` (default :func:`cache_dir`); :meth:`add` appends some. :class:`CacheError`
    when ``verdicts.jsonl`` there is a symbolic link or not a regular file."""

    def __init__(self, folder: Path | None = None) -> None:
        self.path = (folder or cache_dir()) / FILE
        self.replies: dict[str, str] = {}
        if not (self.path.exists() or self.path.is_symlink()):
            return
        fd = _open(self.path, os.O_RDONLY)
        try:
            data = _read_all(fd)
        finally:
            os.close(fd)
        whole = data[:data.rfind(b"\n") + 1]
        for line in whole.decode("utf-8", errors="replace").splitlines():
            try:
                row = json.loads(line)
                if isinstance(row.get("key"), str) and isinstance(row.get("reply"), str):
                    row["reply"].encode("utf-8")  # a lone surrogate (UnicodeEncodeError): skipped, asked again
                    self.replies[row["key"]] = row["reply"][:MAX_REPLY_CHARS]
            except (ValueError, AttributeError, RecursionError):
                continue
        if len(whole) < len(data):
            self._append(b"")  # drops the cut line now (said once), under the lock

    def get(self, k: str) -> str | None:
        return self.replies.get(k)

    def add(self, replies: Mapping[str, str]) -> None:
        """Append ``{key: reply}`` as whole lines in one write (a reply must be text: no lone surrogate)."""
        if not replies:
            return
        text = "".join(json.dumps({"key": k, "reply": r}, ensure_ascii=False) + "\n" for k, r in replies.items())
        self._append(text.encode("utf-8"))  # encoded first: a reply that is no text writes nothing
        self.replies.update(replies)

    def check_writable(self) -> None:
        """:class:`CacheError` unless new replies could be appended: checked before the judge is asked, so that no
        reply is asked for and then lost (nothing is created here)."""
        if self.path.exists():
            writable, target = os.access(self.path, os.W_OK), self.path
        else:
            target = next(p for p in self.path.parents if p.exists())
            writable = target.is_dir() and os.access(target, os.W_OK | os.X_OK)
        if not writable:
            raise CacheError(f"the judge cache {self.path} cannot be written ({target} is read-only or not a "
                             "folder); give another --cache-dir")

    def _append(self, data: bytes) -> None:
        """Append ``data`` after the last whole line, holding the file's exclusive lock (a cut last line, left by a
        process that died mid-write, is dropped first)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = _open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                keep = _read_all(fd).rfind(b"\n") + 1
                os.ftruncate(fd, keep)
                print(f"note: the judge cache {self.path} ended in a line cut by a crash ({size - keep} bytes); "
                      "dropped it", file=sys.stderr)
            while data:
                data = data[os.write(fd, data):]
        except OSError as e:
            raise CacheError(f"the judge cache {self.path} cannot be written ({e.strerror}); give another "
                             "--cache-dir") from None
        finally:
            os.close(fd)  # releases the lock
