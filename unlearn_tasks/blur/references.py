"""BLUR's references: the base model's own answers to every query, the text each evaluated answer is scored against.

``unlearn blur-references --model BASE --out DIR`` writes ``DIR/blur_references.json`` (:func:`write_references`):
its format, the provenance (model and revision, date, package and lm-eval versions, data read), the generation
settings, and per BLUR file stem the queries with the base model's answers. The tasks read it with
``blur_references`` (:func:`load_references`), refusing a file written with other generation settings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unlearn_tasks.blur.options import PROMPT
from unlearn_tasks.dataset_loader import DataError

FORMAT = "blur-references/1"
FILE_NAME = "blur_references.json"


def generation_settings(options: Any, apply_chat_template: bool = False) -> dict[str, Any]:
    """The settings an answer depends on (the reference's and the evaluated answers' must agree)."""
    return {"prompt": PROMPT, "max_new_tokens": int(options.blur_max_tokens), "decoding": "greedy",
            "apply_chat_template": bool(apply_chat_template)}


@dataclass
class References:
    answers: dict[str, dict[str, str]]  # file stem -> {query: the base model's answer}
    settings: dict[str, Any]
    provenance: dict[str, Any]
    path: Path


def reference_path(given: str | Path) -> Path:
    """The references file: ``given``, or ``given/blur_references.json`` for a folder."""
    path = Path(given).expanduser()
    return path / FILE_NAME if path.is_dir() else path


def load_references(given: str | Path, options: Any | None = None) -> References:
    """Read and check a references file; with ``options``, refuse one written with another answer budget."""
    path = reference_path(given)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise DataError(f"blur_references {path} is not UTF-8 text; write it with `unlearn blur-references`.") from None
    except OSError as e:
        raise DataError(f"blur_references {path}: cannot read it ({e.strerror or e}); write it with `unlearn "
                        "blur-references --model BASE --out DIR`.") from None
    except json.JSONDecodeError as e:
        raise DataError(f"blur_references {path}: not valid JSON ({e.msg}, line {e.lineno}).") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("answers"), dict):
        raise DataError(f"blur_references {path}: not a file written by `unlearn blur-references` (format {FORMAT}).")
    settings = data.get("settings") or {}
    if options is not None and settings.get("max_new_tokens") != options.blur_max_tokens:
        raise DataError(f"blur_references {path} was generated with {settings.get('max_new_tokens')} new tokens per "
                        f"answer, this run with blur_max_tokens={options.blur_max_tokens}; use the same budget.")
    answers = {name: {r["question"]: r["answer"] for r in rows} for name, rows in data["answers"].items()}
    return References(answers, settings, data.get("provenance") or {}, path)


def write_references(path: Path, answers: dict[str, list[dict[str, str]]], settings: dict[str, Any],
                     provenance: dict[str, Any]) -> None:
    """Write a references file (``answers``: file stem -> ``[{"question", "answer"}]`` in the data's order)."""
    payload = {"format": FORMAT, "provenance": provenance, "settings": settings, "answers": answers}
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
