"""``unlearn klom`` and ``unlearn ulira``: ensemble metrics (KLoM, U-LiRA) over the margins of N unlearned and M
oracle (retrained without the forget set) models; ``unlearn margins`` (one model's margins, through the
``margins*`` lm-eval tasks) and ``unlearn margins gather`` (many runs into one ensemble array).
Registered in :data:`unlearn_app.cli.EXTENSIONS`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from unlearn_app.commands import DefaultsHelpFormatter, error

#: Above this many margins (models x samples) the commands show progress bars (unless --quiet).
PROGRESS_THRESHOLD = 2_000_000


def _load_inputs(args: argparse.Namespace):
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


def _write_json(path: str, data: dict) -> None:
    from harness_ext.results import json_safe

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(json_safe(data), indent=2) + "\n")


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


def plot_margin_histograms(unlearned: np.ndarray, oracle: np.ndarray, samples: list[int], values: np.ndarray,
                           path: str | Path) -> Path:
    """One panel per sample: both ensembles' margins (clipped to +/-100) on the 20 shared KLoM bins (matplotlib
    draws a value on the top edge in the last bar; KLoM drops it, as EasyDUB does)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from unlearn_tasks.metrics.klom import CLIP, N_BINS, shared_edges

    fig, axes = plt.subplots(1, len(samples), figsize=(4 * len(samples), 3.2), squeeze=False)
    for ax, j in zip(axes[0], samples):
        u = np.clip(unlearned[:, j : j + 1], -CLIP, CLIP)
        o = np.clip(oracle[:, j : j + 1], -CLIP, CLIP)
        edges = shared_edges(u, o, N_BINS + 1)[:, 0]
        ax.hist(o[:, 0], bins=edges, alpha=0.6, label=f"oracle ({o.shape[0]})", color="tab:blue")
        ax.hist(u[:, 0], bins=edges, alpha=0.6, label=f"unlearned ({u.shape[0]})", color="tab:red")
        ax.set_title(f"sample {j}: KLoM {values[j]:.3g}")
        ax.set_xlabel("margin")
    axes[0][0].set_ylabel("models")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _cmd_klom(args: argparse.Namespace) -> int:
    from unlearn_tasks.metrics.klom import KlomInputError, klom

    try:
        u, o, splits = _load_inputs(args)
        size = (u.margins.shape[0] + o.margins.shape[0]) * u.margins.shape[1]
        summary, per_sample = klom(u.margins, o.margins, splits, direction=args.direction, binning=args.binning,
                                   chunk_size=args.chunk_size, progress=not args.quiet and size > PROGRESS_THRESHOLD)
        plot_samples = _sample_list(args.plot_samples, per_sample.size) if args.plot_samples else None
    except KlomInputError as e:
        return error(str(e))
    summary["inputs"] = {"unlearned": u.sources, "oracle": o.sources, "splits": args.splits}
    _write_json(args.out, summary)
    width = max(len(name) for name in summary["splits"])
    print(f"KLoM, KL({args.direction.replace('-', ' || ')}), {args.binning} binning, "
          f"{u.margins.shape[0]} unlearned vs {o.margins.shape[0]} oracle models:")
    for name, s in summary["splits"].items():
        print(f"  {name:<{width}}  p95 {s['p95']:.4f}  mean {s['mean']:.4f}  n {s['n']}")
    print(f"written: {args.out}")
    if args.per_sample_out:
        Path(args.per_sample_out).parent.mkdir(parents=True, exist_ok=True)
        np.save(args.per_sample_out, per_sample)
        print(f"per-sample KLoM: {args.per_sample_out}")
    if plot_samples:
        missing = [j for j in plot_samples if np.isnan(per_sample[j])]
        if missing:
            from unlearn_tasks.metrics.klom import klom_per_sample

            per_sample = per_sample.copy()
            per_sample[missing] = klom_per_sample(u.margins, o.margins, direction=args.direction,
                                                  binning=args.binning, indices=missing)
        plot = args.plot or str(Path(args.out).with_suffix(".png"))
        print(f"plot: {plot_margin_histograms(u.margins, o.margins, plot_samples, per_sample, plot)}")
    return 0


def _cmd_ulira(args: argparse.Namespace) -> int:
    from unlearn_tasks.margins.ensemble import load_ensemble
    from unlearn_tasks.metrics.klom import KlomInputError
    from unlearn_tasks.metrics.ulira import ulira

    try:
        u, o, splits = _load_inputs(args)
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
    _write_json(args.out, summary)
    print(f"U-LiRA on split {split!r} ({summary['n_samples']} samples, {summary['protocol']}, "
          f"{summary['n_unlearned_targets']} unlearned + {summary['n_oracle_targets']} oracle targets):")
    print(f"  AUROC {summary['auroc']:.4f}  accuracy {summary['accuracy']:.4f}  (0.5 = indistinguishable from retrained)")
    print(f"written: {args.out}")
    if args.per_sample_out:
        np.save(args.per_sample_out, per_example)
        print(f"per-sample attack accuracy: {args.per_sample_out}")
    return 0


def _cmd_margins_gather(args: argparse.Namespace) -> int:
    from unlearn_tasks.margins.ensemble import load_ensemble
    from unlearn_tasks.metrics.klom import KlomInputError

    try:
        ens = load_ensemble(args.runs, task=args.task, name="runs", progress=not args.quiet and len(args.runs) > 20)
    except KlomInputError as e:
        return error(str(e))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    np.save(args.out, ens.margins)
    print(f"{ens.margins.shape[0]} models x {ens.margins.shape[1]} samples: {args.out}")
    if args.splits_out:
        if not ens.splits:
            return error("the runs carry no splits")
        _write_json(args.splits_out, ens.splits)
        print(f"splits ({', '.join(f'{k}: {len(v)}' for k, v in ens.splits.items())}): {args.splits_out}")
    return 0


def model_args_for(model: str) -> tuple[str, dict | None]:
    """(pretrained, extra model args) for lm-eval: a LoRA adapter folder (``unlearn run``'s default output) is
    loaded on its base model with ``peft=``."""
    adapter = Path(model) / "adapter_config.json"
    if adapter.is_file():
        base = json.loads(adapter.read_text()).get("base_model_name_or_path")
        if base:
            return base, {"peft": str(model)}
    return model, None


def _cmd_margins(args: argparse.Namespace) -> int:
    import tempfile

    from harness_ext.evaluate import run_lm_eval
    from unlearn_tasks.margins.ensemble import read_record
    from unlearn_tasks.metrics.klom import KlomInputError

    if getattr(args, "margins_command", None) == "gather":
        return _cmd_margins_gather(args)
    if not (args.model and args.data and args.out):
        return error("unlearn margins needs --model DIR [DIR ...], --data (a JSON/JSON-lines file, or tofu) and --out "
                     "FILE.npy; or use `unlearn margins gather RUN_DIRS... --out ens.npy`")
    metadata: dict = {"reduction": args.reduction, "include_eos": args.include_eos}
    if args.data == "tofu":
        task = f"margins_tofu_{args.forget}"
        metadata.update({"data_dir": args.data_dir} if args.data_dir else {})
    else:
        if not Path(args.data).is_file():
            return error(f"{args.data} does not exist (give a JSON / JSON-lines file of prompt/target or text records, "
                         "or 'tofu')")
        task = "margins"
        metadata["data_file"] = str(Path(args.data).resolve())
    rows, records = [], []
    models = args.model
    if len(models) > 1 and not args.quiet:
        from tqdm import tqdm

        models = tqdm(models, desc="Models", unit="model")
    with tempfile.TemporaryDirectory() as tmp:
        for i, model in enumerate(models):
            out_dir = Path(args.lm_eval_out or tmp) / (f"{i:03d}_{Path(model).name}" if len(args.model) > 1 else "")
            pretrained, extra = model_args_for(model)
            try:
                run_lm_eval(pretrained, [task], out_dir, metadata=metadata, backend=args.backend,
                            batch_size=args.batch_size, device=args.device, extra_model_args=extra)
                record, _ = read_record(out_dir, task)
            except (KlomInputError, ValueError) as e:
                return error(f"{model}: {e}")
            records.append(record)
            rows.append([np.nan if v is None else v for v in record["margins"]])
    margins = np.array(rows, dtype=np.float64)
    margins = margins[0] if len(args.model) == 1 else margins
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    np.save(args.out, margins)
    shape = f"{margins.size} margins" if margins.ndim == 1 else f"{margins.shape[0]} models x {margins.shape[1]} samples"
    print(f"{shape} ({records[0]['reduction']} over target tokens): {args.out}")
    if args.splits_out:
        _write_json(args.splits_out, records[0]["splits"])
        print(f"splits: {args.splits_out}")
    return 0


def _add_inputs(p: argparse.ArgumentParser) -> None:
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


def add_parsers(sub) -> None:
    from unlearn_tasks.metrics.klom import BINNINGS, DIRECTIONS
    from unlearn_tasks.metrics.ulira import MIN_STD, VARIANCES

    p = sub.add_parser(
        "klom", help="KLoM (KL divergence of margins, Data-Unlearn-Bench / EasyDUB) of unlearned vs oracle ensembles.",
        description="Per sample, the KL divergence between the histograms of the unlearned and the oracle models' "
        "margins (20 bins shared by both, clipped to +/-100, eps 1e-5), summarised per split by its 95th percentile "
        "and mean. 0 = the unlearned models behave as if never trained on the sample. Default: EasyDUB's exact "
        "computation, KL(unlearned || oracle).",
        formatter_class=DefaultsHelpFormatter)
    _add_inputs(p)
    p.add_argument("--direction", default="unlearned-oracle", choices=DIRECTIONS,
                   help="KL(unlearned || oracle) (EasyDUB, default) or KL(oracle || unlearned) (what "
                   "data-unlearning-bench's run.py computes).")
    p.add_argument("--binning", default="easydub", choices=BINNINGS,
                   help="easydub: EasyDUB's exact bins; dub-main: the same with q renormalised (scipy, "
                   "data-unlearning-bench main); a2d: the original Attribute-to-Delete code (19 intervals, only the "
                   "first ensemble clipped, q floored at 1e-5 everywhere).")
    p.add_argument("--chunk-size", dest="chunk_size", type=int, default=512, help="Samples per vectorised chunk.")
    p.add_argument("--plot-samples", dest="plot_samples", metavar="I,J",
                   help="Draw the margin histograms of these samples.")
    p.add_argument("--plot", help="PNG for --plot-samples (default: OUT with .png).")
    p.set_defaults(func=_cmd_klom)

    p = sub.add_parser(
        "ulira", help="U-LiRA: per-example likelihood-ratio attack telling unlearned from retrained models.",
        description="Per example, Gaussians fitted to the unlearned and the oracle models' margins; the score of a "
        "target model is the log likelihood ratio. Without targets, the models are split into k folds (default "
        "min(#unlearned, #oracle): with equal counts, leave-one-pair-out); each fold's models are the targets and "
        "the other folds' models the shadows. Reports the attack's AUROC and balanced accuracy at LR = 1 "
        "over the chosen split; 0.5 = unlearned models indistinguishable from retrained ones.",
        formatter_class=DefaultsHelpFormatter)
    _add_inputs(p)
    p.add_argument("--split", default="forget", help="Split to attack (when splits are given).")
    p.add_argument("--target-unlearned", dest="target_unlearned", nargs="+",
                   help="Held-out unlearned target models (with --target-oracle) instead of cross-validation.")
    p.add_argument("--target-oracle", dest="target_oracle", nargs="+", help="Held-out oracle target models.")
    p.add_argument("--folds", type=int, help="Cross-validation folds (default: the smaller ensemble size).")
    p.add_argument("--variance", default="per-example", choices=VARIANCES,
                   help="per-example standard deviations, or one per population (median over examples; for few models).")
    p.add_argument("--min-std", dest="min_std", type=float, default=MIN_STD, help="Floor of the standard deviations.")
    p.set_defaults(func=_cmd_ulira)

    p = sub.add_parser(
        "margins", help="Teacher-forced margins of models (runs the margins lm-eval task), or `gather` lm-eval runs.",
        description="Per sample, the margins z_y - logsumexp_{v != y} z_v of the target tokens under teacher forcing, "
        "reduced per sequence (mean by default), saved as .npy ([n_samples] for one model, [n_models, n_samples] for "
        "several). --data is a JSON / JSON-lines file of "
        '{"prompt", "target"} (or {"text"}) records, optional "split", or `tofu` for TOFU forget/retain/holdout. '
        "`unlearn margins gather RUN_DIRS... --out ens.npy` stacks lm-eval runs of a margins task into "
        "[n_models, n_samples].",
        formatter_class=DefaultsHelpFormatter)
    p.add_argument("--model", nargs="+", help="Model folder(s) or Hub id(s); several give an ensemble "
                   "[n_models, n_samples]. A LoRA adapter folder (unlearn run's default) is loaded on its base model.")
    p.add_argument("--data", help="Data file, or 'tofu'.")
    p.add_argument("--forget", default="forget10", choices=["forget01", "forget05", "forget10"],
                   help="With --data tofu: the forget split.")
    p.add_argument("--data-dir", dest="data_dir", help="With --data tofu: local TOFU folder (else the Hub).")
    p.add_argument("--out", help="Output .npy (one margin per sample; [n_models, n_samples] for several models).")
    p.add_argument("--splits-out", dest="splits_out", help="Also write the splits JSON (for unlearn klom --splits).")
    p.add_argument("--reduction", default="mean", choices=["mean", "sum"], help="Per-sequence reduction.")
    p.add_argument("--include-eos", dest="include_eos", action="store_true",
                   help="Also count the EOS token appended to the target.")
    p.add_argument("--backend", default="hf", choices=["hf", "vllm"])
    p.add_argument("--batch-size", dest="batch_size", type=int, default=16)
    p.add_argument("--device", help="Device for hf (default cpu; e.g. cuda).")
    p.add_argument("--lm-eval-out", dest="lm_eval_out", help="Keep lm-eval's output folder(s) here.")
    p.add_argument("--quiet", action="store_true", help="No progress bar over the models.")
    p.set_defaults(func=_cmd_margins)
    gather_sub = p.add_subparsers(dest="margins_command", metavar="gather")
    g = gather_sub.add_parser("gather", help="Stack lm-eval runs of a margins task into [n_models, n_samples].",
                              description="Read the margins record of each lm-eval output folder (one model each) "
                              "and save them as one .npy ensemble, in the order given.")
    g.add_argument("runs", nargs="+", metavar="RUN_DIR", help="lm-eval output folders (or results_*.json files).")
    g.add_argument("--out", required=True, help="Output .npy [n_models, n_samples].")
    g.add_argument("--splits-out", dest="splits_out", help="Also write the runs' splits as JSON.")
    g.add_argument("--task", help="Which margins task, when a run holds several.")
    g.add_argument("--quiet", action="store_true", help="No progress bar.")
    g.set_defaults(func=_cmd_margins)
