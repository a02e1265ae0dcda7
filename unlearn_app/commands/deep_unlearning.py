"""``unlearn deep-unlearning score`` and ``unlearn deep-unlearning sweep``: Success-DU, Recall and Accuracy from
per-fact correctness vectors, and the trade-off summaries of a hyperparameter sweep."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from unlearn_app import output_guard
from unlearn_app.argtypes import float_range
from unlearn_app.commands import InputError, error

ORDER = 70

TASK_KEY = "deep_unlearning"


def _read_json(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path} does not exist")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise InputError(f"{path} is not valid JSON ({e.msg})") from None


def _load_kb(kb: str | None, recorded: str | None = None):
    """The knowledge base from ``--kb``, else the path recorded in a results file, else $UNLEARN_DATA_DIR."""
    from unlearn_tasks.deep_unlearning import load_evaldu
    from unlearn_tasks.deep_unlearning.options import resolve_data_dir

    path = Path(kb) if kb else (Path(recorded) if recorded else resolve_data_dir(None))
    if path is None:
        raise InputError("no knowledge base: pass --kb DIR (an Eval-DU JSON folder or the upstream release "
                         "wrh14/deep_unlearning), or put it at $UNLEARN_DATA_DIR/wrh14/deep_unlearning")
    if path.is_file():
        from unlearn_tasks.deep_unlearning import load_mquake

        return load_mquake(path)
    return load_evaldu(path)


def _vector(path: str, key: str) -> list:
    """A JSON list of booleans; a JSON object holding it under ``key`` (e.g. the worked example) also works."""
    data = _read_json(path)
    if isinstance(data, dict) and isinstance(data.get(key), list):
        data = data[key]
    if not isinstance(data, list):
        raise InputError(f"{path} must hold a JSON list of booleans (one per fact, in fact order)")
    return data


def _cmd_score(args: argparse.Namespace) -> int:
    from unlearn_tasks.deep_unlearning import score

    try:
        kb = _load_kb(args.kb)
        rel = _vector(args.relationships, "relationships_correct")
        bio = _vector(args.biographies, "biographies_correct") if args.biographies else []
        result = score(rel, bio, args.target, kb)
    except (InputError, ValueError) as e:
        return error(str(e))
    keys = ("target", "target_fact", "success_du", "recall", "acc_relationships", "acc_biographies", "acc_all",
            "best_minimal_set", "num_candidate_sets", "minimal_sets_source")
    print(json.dumps({k: result[k] for k in keys}, indent=2))
    return 0


def run_record(path: str | Path) -> tuple[str, dict[str, Any]]:
    """``(task, record)``: the per-fact correctness stored by ``evaldu`` / ``mquake_du`` in a results file."""
    from harness_ext.results import ResultsFileError, latest_results_file

    try:
        file = latest_results_file(path)
    except (FileNotFoundError, ResultsFileError) as e:
        raise InputError(str(e)) from None
    configs = _read_json(file).get("configs") or {}
    found = [(task, cfg[TASK_KEY]) for task, cfg in configs.items() if isinstance(cfg, dict) and TASK_KEY in cfg]
    if len(found) != 1:
        raise InputError(f"{file}: expected one evaldu/mquake_du task with per-fact correctness, found {len(found)} "
                         "(run lm_eval --tasks evaldu without --limit)")
    return found[0]


def sweep_scores(runs: list[str], kb_path: str | None, targets: list[int] | None = None
                 ) -> tuple[dict[str, list[dict]], Any]:
    """Score every run against every target: ``({run name: [score dicts]}, knowledge base)``."""
    from unlearn_tasks.deep_unlearning import score_targets

    records = [(Path(r).name, *run_record(r)) for r in runs]
    kb = _load_kb(kb_path, records[0][2].get("path"))
    scores: dict[str, list[dict]] = {}
    for name, _task, record in records:
        key = name
        while key in scores:
            key += "'"
        scores[key] = score_targets(record["relationships"], record["biographies"], kb, targets)
    return scores, kb


def _cmd_sweep(args: argparse.Namespace) -> int:
    from unlearn_tasks.deep_unlearning import plot_recall_accuracy, sweep_summary

    try:
        targets = [int(t) for t in args.targets.split(",")] if args.targets else None
        per_run, _ = sweep_scores(args.runs, args.kb, targets)
        all_scores = [s for scores in per_run.values() for s in scores]
        summary = sweep_summary(all_scores, threshold=args.threshold, accuracy_key=args.accuracy)
    except (InputError, ValueError) as e:
        return error(str(e))
    summary["runs"] = {name: {m: sum(s[m] for s in scores) / len(scores) for m in ("success_du", "recall", args.accuracy)}
                       for name, scores in per_run.items()}
    if not args.per_target:
        summary.pop("per_target", None)
    print(json.dumps(summary, indent=2))
    if args.plot:
        path = plot_recall_accuracy(all_scores, args.plot, accuracy_key=args.accuracy, threshold=args.threshold)
        print(f"plot: {path}", file=sys.stderr)
    return 0


def add_parsers(sub) -> None:
    """Add ``deep-unlearning score`` and ``deep-unlearning sweep`` to the ``unlearn`` command."""
    p = sub.add_parser("deep-unlearning", help="Deep unlearning (Eval-DU, MQuAKE): Success-DU, Recall, Accuracy.",
                       description="Score per-fact correctness against the deductive closure of a knowledge base.")
    du = p.add_subparsers(dest="du_command", metavar="SUBCOMMAND", required=True)

    kb_help = ("Eval-DU JSON folder or upstream release (wrh14/deep_unlearning), or an MQuAKE JSON file "
               "(default: $UNLEARN_DATA_DIR/wrh14/deep_unlearning; for sweep, the path recorded in the results file)")
    s = du.add_parser("score", help="Success-DU, Recall and Accuracy of one target, as JSON.")
    s.add_argument("--relationships", required=True, metavar="R.json",
                   help="JSON list of booleans, one per relationship fact in fact order (True: still answered).")
    s.add_argument("--biographies", metavar="B.json", help="JSON list of booleans, one per biography fact.")
    s.add_argument("--target", required=True, help="Relationship fact id of the unlearning target (e.g. 272).")
    s.add_argument("--kb", help=kb_help)
    s.set_defaults(func=_cmd_score)

    w = du.add_parser("sweep", help="Trade-off summaries (and Recall-Accuracy plot) over several lm-eval runs.",
                      description="Read the per-fact correctness that evaldu / mquake_du wrote into each run's "
                      "results_*.json, score every target, and print Success-DU@Acc, Recall@Acc, Acc@Recall, AR-AUC.")
    w.add_argument("runs", nargs="+", metavar="RUN", help="lm-eval output folders or results_*.json files.")
    w.add_argument("--kb", help=kb_help)
    w.add_argument("--targets", help="Comma-separated target fact ids (default: all targets of the knowledge base).")
    w.add_argument("--threshold", type=float_range(0.0, 1.0), default=0.8, help="Accuracy/recall threshold (default 0.8).")
    w.add_argument("--accuracy", default="acc_all", choices=["acc_all", "acc_relationships"],
                   help="Accuracy used in the trade-offs (default acc_all).")
    w.add_argument("--per-target", action="store_true", help="Also print the per-target trade-offs.")
    w.add_argument("--plot", metavar="PNG", help="Write the Recall-Accuracy plot here.")
    w.set_defaults(func=_cmd_sweep)
    output_guard.declare(w, outputs=["plot"], inputs=["kb"], scanned={"runs": ("results*.json",)},
                         suffixes={"plot": output_guard.IMAGE_SUFFIXES})
