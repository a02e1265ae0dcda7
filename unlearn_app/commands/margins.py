"""``unlearn margins``: one or several models' teacher-forced margins through the ``margins*`` lm-eval tasks, and
``unlearn margins gather``: many lm-eval runs stacked into one ensemble array."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from unlearn_app import output_guard
from unlearn_app.argtypes import positive_int
from unlearn_app.checkpoint.adapter import find_adapter
from unlearn_app.commands import DefaultsHelpFormatter, error, model_problem
from unlearn_app.commands._ensemble_inputs import write_json

ORDER = 82
#: What a Hugging Face Hub model id looks like (``NAME`` or ``ORG/NAME``).


def _cmd_margins_gather(args: argparse.Namespace) -> int:
    from unlearn_tasks.margins.ensemble import load_ensemble
    from unlearn_tasks.metrics.klom import KlomInputError

    try:
        ens = load_ensemble(args.runs, task=args.task, name="runs", progress=not args.quiet and len(args.runs) > 20)
    except KlomInputError as e:
        return error(str(e))
    with output_guard.atomic_path(args.out) as tmp:
        np.save(tmp, ens.margins)
    print(f"{ens.margins.shape[0]} models x {ens.margins.shape[1]} samples: {args.out}")
    if args.splits_out:
        if not ens.splits:
            return error("the runs carry no splits")
        write_json(args.splits_out, ens.splits)
        print(f"splits ({', '.join(f'{k}: {len(v)}' for k, v in ens.splits.items())}): {args.splits_out}")
    return 0


def _problem(args: argparse.Namespace) -> str | None:
    """What is wrong with ``unlearn margins``' options, in one line, or None: checked before any model is loaded, and
    once by the one process ``accelerate launch --cpu`` starts, before it starts the N
    (:func:`unlearn_app.launch.relaunch_cpu_processes`), which would otherwise each refuse it in turn."""
    from unlearn_app.checkpoint.adapter import AdapterError

    if getattr(args, "margins_command", None) == "gather":
        return None
    if not (args.model and args.data and args.out):
        return ("unlearn margins needs --model DIR [DIR ...], --data (a JSON/JSON-lines file, or tofu) and --out "
                "FILE.npy; or use `unlearn margins gather RUN_DIRS... --out ens.npy`")
    if args.data != "tofu" and not Path(args.data).is_file():
        return (f"{args.data} does not exist (give a JSON / JSON-lines file of prompt/target or text records, "
                "or 'tofu')")
    for model in args.model:
        if problem := model_problem(model):
            return problem
        try:
            find_adapter(model)
        except AdapterError as e:
            return f"{model}: {e}"
    return None


def _cmd_margins(args: argparse.Namespace) -> int:
    import tempfile

    from harness_ext.evaluate import is_main_process, run_lm_eval
    from unlearn_tasks.margins.ensemble import read_record
    from unlearn_tasks.metrics.klom import KlomInputError

    if getattr(args, "margins_command", None) == "gather":
        return _cmd_margins_gather(args)
    if problem := _problem(args):
        return error(problem)
    metadata: dict = {"reduction": args.reduction, "include_eos": args.include_eos}
    if args.data == "tofu":
        task = f"margins_tofu_{args.forget}"
        metadata.update({"data_dir": args.data_dir} if args.data_dir else {})
    else:
        task = "margins"
        metadata["data_file"] = str(Path(args.data).resolve())
    main = is_main_process()  # under a launcher every process scores its share, the main one reads and writes
    rows, records = [], []
    models = args.model
    if len(models) > 1 and not args.quiet and main:
        from tqdm import tqdm

        models = tqdm(models, desc="Models", unit="model")
    with tempfile.TemporaryDirectory() as tmp:
        for i, model in enumerate(models):
            out_dir = Path(args.lm_eval_out or tmp) / (f"{i:03d}_{Path(model).name}" if len(args.model) > 1 else "")
            try:
                adapter = find_adapter(model)  # a LoRA adapter folder (unlearn run's default) loads on its base
                pretrained, extra = (adapter.base, adapter.model_args(args.backend)) if adapter else (model, None)
                res = run_lm_eval(pretrained, [task], out_dir, metadata=metadata, backend=args.backend,
                                  batch_size=args.batch_size, device=args.device, extra_model_args=extra)
                if not main:
                    continue
                if res is None:
                    return error(f"{model}: lm-eval returned no results on the main process")
                record, _ = read_record(out_dir, task)
            except (KlomInputError, ValueError) as e:
                return error(f"{model}: {e}")
            records.append(record)
            rows.append([np.nan if v is None else v for v in record["margins"]])
    if not main:  # this process scored its share of every model's requests; the main process writes
        return 0
    margins = np.array(rows, dtype=np.float64)
    margins = margins[0] if len(args.model) == 1 else margins
    with output_guard.atomic_path(args.out) as tmp:
        np.save(tmp, margins)
    shape = f"{margins.size} margins" if margins.ndim == 1 else f"{margins.shape[0]} models x {margins.shape[1]} samples"
    print(f"{shape} ({records[0]['reduction']} over target tokens): {args.out}")
    if args.splits_out:
        write_json(args.splits_out, records[0]["splits"])
        print(f"splits: {args.splits_out}")
    return 0


def add_parsers(sub) -> None:
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
    p.add_argument("--batch-size", dest="batch_size", type=positive_int, default=16)
    p.add_argument("--device", help="Device for hf (default: cuda when a GPU is visible, else cpu).")
    p.add_argument("--lm-eval-out", dest="lm_eval_out", help="Keep lm-eval's output folder(s) here.")
    p.add_argument("--quiet", action="store_true", help="No progress bar over the models.")
    p.set_defaults(func=_cmd_margins, launch_problem=_problem)
    output_guard.declare(p, outputs=["out", "splits_out", "lm_eval_out"], inputs=["model", "data", "data_dir"],
                         folders=["lm_eval_out"], suffixes={"out": (".npy",)})
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
    output_guard.declare(g, outputs=["out", "splits_out"], scanned={"runs": ("results*.json",)},
                         suffixes={"out": (".npy",)})
