"""A sweep's selected trial, for ``unlearn ci --from-sweep DIR [--method M]``: the leaderboard's best row (or the best
row of method M), and of that setting's seeds the trial whose own ``select`` score is best. Read from
``DIR/leaderboard.json`` (what the leaderboard shows), so the gated trial is the one the leaderboard names."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


class NoTrial(ValueError):
    """The sweep has no trial to gate; the message says why and what to do."""


def _read_board(path: Path, sweep: Path) -> dict[str, Any]:
    """``leaderboard.json`` as written by `unlearn sweep`, or :class:`NoTrial` saying how to write it again."""
    again = f"write it again with unlearn sweep SPEC --out {sweep} --leaderboard-only"
    try:
        board = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise NoTrial(f"--from-sweep {sweep}: {path} is not UTF-8 text; {again}") from None
    except json.JSONDecodeError as e:
        raise NoTrial(f"--from-sweep {sweep}: {path} is not valid JSON (cut short? {e.msg} at line {e.lineno} "
                      f"column {e.colno}); {again}") from None
    rows = board.get("leaderboard") if isinstance(board, dict) else None
    trials = board.get("trials") if isinstance(board, dict) else None
    fields = (("method", str), ("setting", str), ("trials", list))
    if not (isinstance(rows, list) and isinstance(trials, list)
            and all(isinstance(r, dict) and all(isinstance(r.get(k), t) for k, t in fields) for r in rows)
            and all(isinstance(r, dict) and isinstance(r.get("id"), str) for r in trials)):
        raise NoTrial(f"--from-sweep {sweep}: {path} is not a sweep leaderboard (an object with leaderboard rows "
                      f"and trials); {again}")
    return board


def best_trial(sweep: str | Path, method: str | None = None) -> dict[str, Any]:
    """The selected trial's record of the sweep in ``sweep`` (with ``results_dir`` and ``checkpoint`` paths added,
    and ``selected_by``: the sweep's rule)."""
    from unlearn_app.selection import parse_select

    sweep = Path(sweep)
    board_file = sweep / "leaderboard.json"
    if not board_file.is_file():
        raise NoTrial(f"--from-sweep {sweep}: no leaderboard.json; write it with unlearn sweep SPEC --out {sweep} "
                      "--leaderboard-only")
    board = _read_board(board_file, sweep)
    rows = [r for r in board["leaderboard"] if method is None or r["method"] == method]
    if not rows:
        methods = sorted({r["method"] for r in board["leaderboard"]})
        raise NoTrial(f"--method {method}: the leaderboard of {sweep} has no row for it; its methods: "
                      f"{', '.join(methods) or 'none (no setting passed select_if, or every trial failed)'}")
    if not board.get("select") and len(rows) > 1:
        raise NoTrial(f"--from-sweep {sweep}: the sweep has no select: rule, so no trial is the best; "
                      "give --method (with one setting) or gate a trial with --from-results DIR/trials/<id>/model/eval")
    row = rows[0]  # rows are best first
    records = {r["id"]: r for r in board["trials"]}
    runs = [records[i] for i in row["trials"] if records.get(i, {}).get("results_file")]
    if not runs:
        raise NoTrial(f"--from-sweep {sweep}: the selected setting {row['setting']} has no results file")
    if board.get("select"):
        try:
            rule = parse_select(str(board["select"]), [])
        except ValueError as e:
            raise NoTrial(f"--from-sweep {sweep}: leaderboard.json's select {board['select']!r}: {e}") from None

        def score(record: dict[str, Any]) -> float:
            try:
                value = float(rule.score(record["metrics"]))
            except (LookupError, TypeError, ValueError):
                return -math.inf
            return -math.inf if not math.isfinite(value) else value if rule.mode == "max" else -value

        runs = sorted(runs, key=score, reverse=True)  # stable: the first seed among equals
    record = dict(runs[0])
    results = sweep / record["results_file"]
    record.update(results_dir=str(results.parent), checkpoint=str(sweep / "trials" / record["id"] / "model"),
                  selected_by=board.get("select"))
    return record
