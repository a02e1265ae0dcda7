"""``unlearn ulira``: U-LiRA, the per-example likelihood-ratio attack telling unlearned from retrained models."""

from __future__ import annotations

import argparse

import numpy as np

from unlearn_app import output_guard
from unlearn_app.argtypes import int_range, positive_float
from unlearn_app.commands import DefaultsHelpFormatter, error
from unlearn_app.commands._ensemble_inputs import add_inputs, load_inputs, write_json

ORDER = 81


def _cmd_ulira(args: argparse.Namespace) -> int:
    from unlearn_tasks.margins.ensemble import load_ensemble
    from unlearn_tasks.metrics.klom import KlomInputError
    from unlearn_tasks.metrics.ulira import ulira

    try:
        u, o, splits = load_inputs(args)
        if (args.target_unlearned is None) != (args.target_oracle is None):
            raise KlomInputError("give both --target-unlearned and --target-oracle, or neither (cross-validation over the ensembles)")
        tu = to = None
        if args.target_unlearned:
            tu = load_ensemble(args.target_unlearned, args.labels, args.task, "target unlearned").margins
            to = load_ensemble(args.target_oracle, args.labels, args.task, "target oracle").margins
        indices, split = None, "all"
        if splits:
            if args.split not in splits:
                raise KlomInputError(f"no split {args.split!r} in the splits (they are: {', '.join(splits)}); "
                                     "pick one with --split")
            indices, split = splits[args.split], args.split
        summary, per_example = ulira(u.margins, o.margins, indices, target_unlearned=tu, target_oracle=to,
                                     folds=args.folds, variance=args.variance, min_std=args.min_std)
    except KlomInputError as e:
        return error(str(e))
    summary = {"split": split, **summary, "inputs": {"unlearned": u.sources, "oracle": o.sources}}
    write_json(args.out, summary)
    print(f"U-LiRA on split {split!r} ({summary['n_samples']} samples, {summary['protocol']}, "
          f"{summary['n_unlearned_targets']} unlearned + {summary['n_oracle_targets']} oracle targets):")
    print(f"  AUROC {summary['auroc']:.4f}  accuracy {summary['accuracy']:.4f}  (0.5 = indistinguishable from retrained)")
    print(f"written: {args.out}")
    if args.per_sample_out:
        with output_guard.atomic_path(args.per_sample_out) as tmp:
            np.save(tmp, per_example)
        print(f"per-sample attack accuracy: {args.per_sample_out}")
    return 0


def add_parsers(sub) -> None:
    from unlearn_tasks.metrics.ulira import MIN_STD, VARIANCES

    p = sub.add_parser(
        "ulira", help="U-LiRA: per-example likelihood-ratio attack telling unlearned from retrained models.",
        description="Per example, Gaussians fitted to the unlearned and the oracle models' margins; the score of a "
        "target model is the log likelihood ratio. Without targets, the models are split into k folds (default "
        "min(#unlearned, #oracle): with equal counts, leave-one-pair-out); each fold's models are the targets and "
        "the other folds' models the shadows. Reports the attack's AUROC and balanced accuracy at LR = 1 "
        "over the chosen split; 0.5 = unlearned models indistinguishable from retrained ones.",
        formatter_class=DefaultsHelpFormatter)
    add_inputs(p)
    p.add_argument("--split", default="forget", help="Split to attack (when splits are given).")
    p.add_argument("--target-unlearned", dest="target_unlearned", nargs="+",
                   help="Held-out unlearned target models (with --target-oracle) instead of cross-validation.")
    p.add_argument("--target-oracle", dest="target_oracle", nargs="+", help="Held-out oracle target models.")
    p.add_argument("--folds", type=int_range(2), help="Cross-validation folds (default: the smaller ensemble size).")
    p.add_argument("--variance", default="per-example", choices=VARIANCES,
                   help="per-example standard deviations, or one per population (median over examples; for few models).")
    p.add_argument("--min-std", dest="min_std", type=positive_float, default=MIN_STD, help="Floor of the standard deviations.")
    p.set_defaults(func=_cmd_ulira)
    output_guard.declare(p, outputs=["out", "per_sample_out"], inputs=["labels", "splits"],
                         suffixes={"per_sample_out": (".npy",)},
                         scanned={d: ("results*.json",) for d in ("unlearned", "oracle", "target_unlearned",
                                                                   "target_oracle")})
