"""``unlearn klom``: KLoM (KL divergence of margins) of an unlearned vs an oracle (retrained without the forget set)
ensemble, with optional per-sample margin histograms."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from unlearn_app import output_guard
from unlearn_app.argtypes import positive_int
from unlearn_app.commands import DefaultsHelpFormatter, error
from unlearn_app.commands._ensemble_inputs import add_inputs, load_inputs, write_json
from unlearn_app.reports import plots

ORDER = 80

#: Above this many margins (models x samples) the commands show progress bars (unless --quiet).
PROGRESS_THRESHOLD = 2_000_000


def _sample_list(text: str, n_samples: int) -> list[int]:
    from unlearn_tasks.metrics.klom import KlomInputError

    try:
        samples = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise KlomInputError(f"--plot-samples expects comma-separated sample indices, got {text!r}") from None
    bad = [s for s in samples if not 0 <= s < n_samples]
    if not samples or bad:
        raise KlomInputError(f"--plot-samples: {bad or text!r} not valid sample indices (0..{n_samples - 1})")
    return samples


def _cmd_klom(args: argparse.Namespace) -> int:
    from unlearn_tasks.metrics.klom import KlomInputError, klom

    plot = args.plot or str(Path(args.out).with_suffix(".png"))
    try:  # the default plot (OUT with .png) is checked like the declared outputs, before anything is written
        output_guard.check(args, [("plot", plot)] if args.plot_samples and not args.plot else [])
    except output_guard.OutputClash as e:
        return error(str(e))
    try:
        u, o, splits = load_inputs(args)
        size = (u.margins.shape[0] + o.margins.shape[0]) * u.margins.shape[1]
        summary, per_sample = klom(u.margins, o.margins, splits, direction=args.direction, binning=args.binning,
                                   chunk_size=args.chunk_size, progress=not args.quiet and size > PROGRESS_THRESHOLD)
        plot_samples = _sample_list(args.plot_samples, per_sample.size) if args.plot_samples else None
    except KlomInputError as e:
        return error(str(e))
    summary["inputs"] = {"unlearned": u.sources, "oracle": o.sources, "splits": args.splits}
    write_json(args.out, summary)
    width = max(len(name) for name in summary["splits"])
    print(f"KLoM, KL({args.direction.replace('-', ' || ')}), {args.binning} binning, "
          f"{u.margins.shape[0]} unlearned vs {o.margins.shape[0]} oracle models:")
    for name, s in summary["splits"].items():
        print(f"  {name:<{width}}  p95 {s['p95']:.4f}  mean {s['mean']:.4f}  n {s['n']}")
    print(f"written: {args.out}")
    if args.per_sample_out:
        with output_guard.atomic_path(args.per_sample_out) as tmp:
            np.save(tmp, per_sample)
        print(f"per-sample KLoM: {args.per_sample_out}")
    if plot_samples:
        missing = [j for j in plot_samples if np.isnan(per_sample[j])]
        if missing:
            from unlearn_tasks.metrics.klom import klom_per_sample

            per_sample = per_sample.copy()
            per_sample[missing] = klom_per_sample(u.margins, o.margins, direction=args.direction,
                                                  binning=args.binning, indices=missing)
        print(f"plot: {plots.margin_histograms(u.margins, o.margins, plot_samples, per_sample, plot)}")
    return 0


def add_parsers(sub) -> None:
    from unlearn_tasks.metrics.klom import BINNINGS, DIRECTIONS

    p = sub.add_parser(
        "klom", help="KLoM (KL divergence of margins, Data-Unlearn-Bench / EasyDUB) of unlearned vs oracle ensembles.",
        description="Per sample, the KL divergence between the histograms of the unlearned and the oracle models' "
        "margins (20 bins shared by both, clipped to +/-100, eps 1e-5), summarised per split by its 95th percentile "
        "and mean. 0 = the unlearned models behave as if never trained on the sample. Default: EasyDUB's exact "
        "computation, KL(unlearned || oracle).",
        formatter_class=DefaultsHelpFormatter)
    add_inputs(p)
    p.add_argument("--direction", default="unlearned-oracle", choices=DIRECTIONS,
                   help="KL(unlearned || oracle) (EasyDUB, default) or KL(oracle || unlearned) (what "
                   "data-unlearning-bench's run.py computes).")
    p.add_argument("--binning", default="easydub", choices=BINNINGS,
                   help="easydub: EasyDUB's exact bins; dub-main: the same with q renormalised (scipy, "
                   "data-unlearning-bench main); a2d: the original Attribute-to-Delete code (19 intervals, only the "
                   "first ensemble clipped, q floored at 1e-5 everywhere).")
    p.add_argument("--chunk-size", dest="chunk_size", type=positive_int, default=512,
                   help="Samples per vectorised chunk (memory only; the result does not depend on it).")
    p.add_argument("--plot-samples", dest="plot_samples", metavar="I,J",
                   help="Draw the margin histograms of these samples.")
    p.add_argument("--plot", help="PNG for --plot-samples (default: OUT with .png).")
    p.set_defaults(func=_cmd_klom)
    output_guard.declare(p, outputs=["out", "per_sample_out", "plot"], inputs=["labels", "splits"],
                         suffixes={"per_sample_out": (".npy",), "plot": output_guard.IMAGE_SUFFIXES},
                         scanned={"unlearned": ("results*.json",), "oracle": ("results*.json",)})
