"""What ``unlearn klom`` and ``unlearn ulira`` share: the unlearned / oracle ensemble options, reading them, and
writing a result JSON. (A leading underscore: not a command module.)"""

from __future__ import annotations

import argparse
import json


def load_inputs(args: argparse.Namespace):
    from unlearn_tasks.margins.ensemble import load_ensemble, load_splits

    progress = not args.quiet and len(args.unlearned) + len(args.oracle) > 20
    u = load_ensemble(args.unlearned, args.labels, args.task, "unlearned", progress)
    o = load_ensemble(args.oracle, args.labels, args.task, "oracle", progress)
    if u.hash and o.hash and u.hash != o.hash:
        from unlearn_tasks.metrics.klom import KlomInputError

        raise KlomInputError(f"the unlearned runs ({u.sources[0]}) and the oracle runs ({o.sources[0]}) scored different "
                             "samples: run the same margins task with the same data and options on both")
    splits = load_splits(args.splits) if args.splits else (u.splits or o.splits)
    return u, o, splits


def write_json(path: str, data: dict) -> None:
    from harness_ext.results import json_safe
    from unlearn_app.output_guard import write_text

    write_text(path, json.dumps(json_safe(data), indent=2) + "\n")


def add_inputs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--unlearned", nargs="+", required=True, metavar="U",
                   help="Margins of the unlearned models: one .npy [n_models, n_samples], or several files / lm-eval "
                   "output folders of a margins_* task (one per model). .npz with 'margins' or 'logits' (+ 'labels') "
                   "also work.")
    p.add_argument("--oracle", nargs="+", required=True, metavar="O",
                   help="Margins of the oracle models (retrained without the forget set), same forms as --unlearned; "
                   "the model count may differ.")
    p.add_argument("--labels", help="Labels .npy/.npz: the inputs are then logits [n_samples, n_classes] (or "
                   "[n_models, n_samples, n_classes]) and margins are computed as z_y - logsumexp of the others.")
    p.add_argument("--splits", help='JSON {"forget": [indices], "retain": [...], ...}. Default: the splits recorded by '
                   "the margins task in lm-eval inputs, else one split 'all'.")
    p.add_argument("--task", help="With lm-eval folders holding several margins tasks: which one.")
    p.add_argument("--out", required=True, help="Result JSON.")
    p.add_argument("--per-sample-out", dest="per_sample_out", help="Also save the per-sample values (.npy).")
    p.add_argument("--quiet", action="store_true", help="No progress bars.")
