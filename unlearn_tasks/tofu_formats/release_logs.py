"""Read the ReLU release's comprehension-QA prediction logs and score them with this package's scoring.

The release writes one CSV per checkpoint (``prompt,prediction,target``) with newlines stored as the two
characters ``\\n``. Its logged score is the mean ROUGE F1 (1/2/L) of the predictions *with real newlines*:
:func:`read_comprehension_log` undoes the escaping, so :func:`comprehension_score` of a release log equals the
number the release logged for that checkpoint (and the score our ``tofu_comprehension_qa`` tasks compute in
parity mode from the same predictions).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from unlearn_tasks.tofu_formats.scoring import rouge_f1_mean

COLUMNS = ("prompt", "prediction", "target")


def unescape(text: str) -> str:
    """The release's stored text with its ``\\n`` escapes turned back into newlines."""
    return text.replace("\\n", "\n")


def read_comprehension_log(path: str | Path) -> list[tuple[str, str]]:
    """(prediction, target) pairs of a release log, unescaped; ``ValueError`` naming the file if columns are missing."""
    path = Path(path)
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: not a ReLU comprehension-QA log (columns {COLUMNS} expected, missing {missing}).")
        return [(unescape(row["prediction"]), unescape(row["target"])) for row in reader]


def comprehension_score(pairs: list[tuple[str, str]]) -> float:
    """Mean of ``(ROUGE-1 F + ROUGE-2 F + ROUGE-L F) / 3`` over (prediction, target) pairs."""
    return float(np.mean([rouge_f1_mean(target, prediction) for prediction, target in pairs]))
