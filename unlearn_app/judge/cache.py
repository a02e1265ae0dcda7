"""The judge's verdict cache: the judge's raw reply per (judge id and revision, prompt name and sha256, whether the
judge's chat template was applied, question, ground truth, answer), so a rerun of ``unlearn judge`` asks nothing it
asked before. One JSON line per reply in ``verdicts.jsonl`` under ``$UNLEARN_JUDGE_CACHE``, else
``$XDG_CACHE_HOME/lm-eval-unlearning/judge`` (``~/.cache/lm-eval-unlearning/judge``). Lines are only appended; a
line that does not read (a crash mid-write) is skipped."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

FILE = "verdicts.jsonl"


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


class VerdictCache:
    """The replies cached in ``folder`` (default :func:`cache_dir`); :meth:`add` appends one."""

    def __init__(self, folder: Path | None = None) -> None:
        self.path = (folder or cache_dir()) / FILE
        self.replies: dict[str, str] = {}
        if self.path.is_file() and not self.path.is_symlink():
            for line in self.path.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    row = json.loads(line)
                    if isinstance(row.get("key"), str) and isinstance(row.get("reply"), str):
                        self.replies[row["key"]] = row["reply"]
                except (ValueError, AttributeError):
                    continue

    def get(self, k: str) -> str | None:
        return self.replies.get(k)

    def add(self, replies: Mapping[str, str]) -> None:
        """Append ``{key: reply}`` (one write of whole lines)."""
        if not replies:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.is_symlink():
            raise OSError(f"{self.path} is a symbolic link; the judge cache writes only a plain file")
        text = "".join(json.dumps({"key": k, "reply": r}, ensure_ascii=False) + "\n" for k, r in replies.items())
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(text)
        self.replies.update(replies)
