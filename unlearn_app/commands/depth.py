"""``unlearn depth``: the Unlearning Depth Score (UDS, arXiv 2605.24614) of an unlearned model against its target
(full) and retain models, by two-stage activation patching (:mod:`unlearn_methods.patching`, the score:
:mod:`unlearn_tasks.metrics.depth`). Writes ``OUT/results_uds.json`` (an lm-eval-shaped results file that
``unlearn report`` and ``unlearn ci --from-results`` read) and ``OUT/uds_layers.png``."""

from __future__ import annotations

import argparse
import json
import math
import re
import time
from pathlib import Path
from typing import Any

from unlearn_app import output_guard
from unlearn_app.argtypes import positive_int
from unlearn_app.commands import DefaultsHelpFormatter, error, model_problem

ORDER = 84
#: What must agree between the three models (their config.json) for hidden states to be exchanged.
ARCH_KEYS = ("model_type", "hidden_size", "num_hidden_layers", "vocab_size")
RESULTS_FILE = "results_uds.json"
PLOT_FILE = "uds_layers.png"
ROLES = (("model", "--model"), ("target", "--target"), ("retain", "--retain"))
_LAYERS = re.compile(r"all|\d{1,9}(-\d{1,9})?(,\d{1,9}(-\d{1,9})?)*")  # numbers of at most 9 digits


def parse_layers(spec: str, n_layers: int) -> list[int]:
    """``all`` or a comma list of layers and ranges (``0-3,7``), checked against ``n_layers`` before any range is
    expanded (``0-20000000`` is refused at once, not after building a list of twenty million layers)."""
    if spec == "all":
        return list(range(n_layers))
    bounds = [(int(a), int(b or a)) for a, _, b in (part.partition("-") for part in spec.split(","))]
    if not bounds or any(b >= n_layers or a > b for a, b in bounds):
        raise ValueError(f"--layers {spec}: the models have layers 0-{n_layers - 1} (give ranges low-high within "
                         "them)")
    return sorted({layer for a, b in bounds for layer in range(a, b + 1)})


def local_config(model: str, flag: str = "--model") -> dict[str, Any] | None:
    """The ``config.json`` of a local model folder (an adapter folder: its base's), or None (a Hub id); a
    ValueError (one line) when it is not a readable JSON object."""
    from harness_ext.results import read_json_file
    from unlearn_app.checkpoint.adapter import find_adapter

    adapter = find_adapter(model)
    folder = Path(adapter.base if adapter else model).expanduser()
    file = folder / "config.json"
    if not file.is_file():
        return None
    remedy = "give the folder transformers' save_pretrained wrote"
    config = read_json_file(file, ValueError, f"{flag} model's config", "save_pretrained", remedy)
    if not isinstance(config, dict):
        raise ValueError(f"{file} is not a model config (a JSON object of settings, not a {type(config).__name__}); "
                         f"{remedy}")
    return config


def architecture_problem(configs: dict[str, dict[str, Any] | None]) -> str | None:
    """Why the models cannot exchange hidden states (a key of :data:`ARCH_KEYS` differs), or None. ``configs``:
    option name -> config (None: not known yet)."""
    known = {k: c for k, c in configs.items() if c is not None}
    if "--target" not in known:
        return None
    ref = known["--target"]
    for flag, config in known.items():
        for key in ARCH_KEYS:
            if config.get(key) != ref.get(key):
                return (f"{flag} differs from --target in {key} ({config.get(key)} vs {ref.get(key)}); UDS patches "
                        "hidden states between models of one architecture (give the same base model's checkpoints)")
    return None


def _cheap_checks(args: argparse.Namespace) -> str | None:
    for dest, flag in ROLES:
        if problem := model_problem(getattr(args, dest), flag):
            return problem
    for dest, flag in (("entities", "--entities"), ("data_dir", "--data-dir")):
        value = getattr(args, dest)
        if value and not Path(value).expanduser().exists():
            return f"{flag} {value} does not exist"
    if not math.isfinite(args.tau) or args.tau < 0:
        return f"--tau {args.tau}: give a finite threshold >= 0 (the release's: 0.05)"
    if not _LAYERS.fullmatch(args.layers):
        return f"--layers {args.layers}: give 'all' or layers and ranges such as 0-3,7"
    from unlearn_tasks.dataset_loader import can_name_dataset

    if not can_name_dataset(args.data):
        return f"--data {args.data!r} is neither tofu nor a Hub dataset id in TOFU's schema (ORG/NAME)"
    from unlearn_methods.depth_items import read_annotations

    try:
        args._annotations = read_annotations(args.entities) if args.entities else None
        configs = {flag: local_config(getattr(args, dest), flag) for dest, flag in ROLES}
        args._configs = configs
        if (problem := architecture_problem(configs)) is None and configs["--target"] is not None:
            parse_layers(args.layers, _layer_count(configs["--target"]))
    except ValueError as e:
        return str(e)
    return problem


def _layer_count(config: dict[str, Any]) -> int:
    """The decoder layers a model config declares (a ValueError when it declares no number)."""
    n = config.get("num_hidden_layers")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"the --target model's config gives num_hidden_layers {n!r}, not a number of layers")
    return n


def _weights(source: str, dtype, flag: str, quiet: bool = False):
    """The model at ``source`` with every weight its config declares loaded from its files, else a ValueError:
    a weight of another shape than the config gives, or one the files lack, would be random (transformers only warns,
    or fails with a multi-line report), and the UDS of a random layer is meaningless."""
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging

    verbosity, bar = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()  # the load report: said below in one line
    if quiet:
        logging.disable_progress_bar()
    try:
        model, info = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, ignore_mismatched_sizes=True,
                                                           output_loading_info=True)
    finally:
        logging.set_verbosity(verbosity)
        if bar:
            logging.enable_progress_bar()
    if info.get("mismatched_keys"):
        key, saved, declared = sorted(info["mismatched_keys"])[0]
        raise ValueError(f"{flag} {source}: its weights do not match its config.json ({len(info['mismatched_keys'])} "
                         f"of another shape, e.g. {key}: {list(saved)} in the weights, {list(declared)} by the "
                         "config); give the config saved with these weights")
    if info.get("missing_keys"):
        missing = sorted(info["missing_keys"])
        raise ValueError(f"{flag} {source}: its weights lack {len(missing)} weights the config declares (e.g. {missing[0]}); "
                         "give the config saved with these weights")
    return model


def _load_model(model: str, dtype, device: str, flag: str = "--model", quiet: bool = False):
    from unlearn_app.checkpoint.adapter import find_adapter

    adapter = find_adapter(model)
    if adapter is None:
        return _weights(model, dtype, flag, quiet).to(device).eval()
    from peft import PeftModel

    base = _weights(adapter.base, dtype, f"{flag}'s base model", quiet)
    return PeftModel.from_pretrained(base, adapter.path).merge_and_unload().to(device).eval()


def _model_record(model: str, loaded) -> dict[str, Any]:
    """Where a model came from: its Hub id and commit, or its folder and a hash of its files (an adapter: both)."""
    from harness_ext.provenance import folder_sha256
    from unlearn_app.checkpoint.adapter import find_adapter

    adapter = find_adapter(model)
    record: dict[str, Any] = {"name": model}
    if adapter:
        record["adapter_sha256"] = folder_sha256(Path(adapter.path))
        record["base"] = adapter.base
    source = Path(adapter.base if adapter else model).expanduser()
    if source.is_dir():
        record["sha256"] = folder_sha256(source)
    else:
        record["revision"] = getattr(loaded.config, "_commit_hash", None)
    return record


def _task_name(args: argparse.Namespace) -> str:
    return f"tofu_{args.forget}_uds" if args.data == "tofu" else f"{args.forget}_uds"


def _cmd_depth(args: argparse.Namespace) -> int:
    if problem := _cheap_checks(args):
        return error(problem)
    import torch
    from transformers import AutoConfig, AutoTokenizer

    from harness_ext import provenance
    from harness_ext.results import json_safe
    from unlearn_app.checkpoint.adapter import find_adapter
    from unlearn_app.leaderboard.depth import PRODUCER
    from unlearn_app.reports.plots import depth_layers
    from unlearn_methods.data_sources import data_source
    from unlearn_methods.depth_items import DepthDataError, build_items
    from unlearn_methods.forget_retain import load_qa
    from unlearn_methods.patching import depth_scores
    from unlearn_tasks.dataset_loader import DataError
    from unlearn_tasks.metrics.depth import example_depth, overall_uds, per_layer

    configs = dict(args._configs)
    try:  # Hub models: their configs (small files) before any weights
        for dest, flag in ROLES:
            if configs[flag] is None:
                adapter = find_adapter(getattr(args, dest))
                configs[flag] = AutoConfig.from_pretrained(adapter.base if adapter else getattr(args, dest)).to_dict()
    except (OSError, ValueError) as e:
        return error(f"cannot read a model's config: {str(e).splitlines()[0]}")
    if problem := architecture_problem(configs):
        return error(problem)
    try:
        layers = parse_layers(args.layers, _layer_count(configs["--target"]))
        annotations = args._annotations
        with provenance.recording() as data_read:
            records = load_qa(args.forget, data_source(args.data).dataset(args.data), args.data_dir)
    except (ValueError, DataError, DepthDataError) as e:
        return error(str(e))
    if args.limit:
        records = records[: args.limit]
    dtype = getattr(torch, args.dtype)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    target_src = find_adapter(args.target)
    tokenizer = AutoTokenizer.from_pretrained(target_src.base if target_src else args.target)
    try:
        items, skipped = build_items(tokenizer, records, args.prompt_format, annotations)
    except DepthDataError as e:
        return error(str(e))
    if not items:
        return error(f"no question of {args.forget} could be scored ({skipped[0]['reason'] if skipped else 'empty'})")
    started = time.perf_counter()
    try:
        models = {dest: _load_model(getattr(args, dest), dtype, device, flag, args.quiet)
                  for dest, flag in ROLES}
    except ValueError as e:  # ours, or transformers' word on a folder it cannot load
        return error(str(e).strip().splitlines()[0])
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    bar = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(total=len(items), desc=f"UDS (2 stages x {len(layers)} layers)", unit="question")
    full, s1, s2 = depth_scores(models["target"], models["retain"], models["model"], items, pad_id,
                                batch_size=args.batch_size, layers=layers, progress=bar.update if bar else None,
                                states=args.states)
    if bar:
        bar.close()
    examples = [example_depth(f, a, b, args.tau) for f, a, b in zip(full, s1, s2)]
    uds = overall_uds(examples)
    rows = per_layer(examples)
    for row in rows:
        row["layer"] = layers[row["layer"]]
    task = _task_name(args)
    options = {"prompt_format": args.prompt_format, "span": "entity" if annotations is not None else "answer",
               "tau": args.tau, "layers": layers, "states": args.states, "dtype": args.dtype, "batch_size": args.batch_size,
               "limit": args.limit, "entities": args.entities}
    if args.entities:
        options["entities_sha256"] = provenance.file_sha256(args.entities)
    per_item = [{"index": it.index, "question": it.question, "span": it.span_text, "full": f,
                 "s1": a, "s2": b, "ke_layers": [layers[i] for i in e.ke_layers], "uds": e.uds}
                for it, f, a, b, e in zip(items, full, s1, s2, examples)]
    result = {
        "results": {task: {"alias": task, "uds,none": uds, "scored,none": sum(e.uds is not None for e in examples),
                           "without_ke_layer,none": sum(e.uds is None for e in examples),
                           "skipped,none": len(skipped)}},
        "higher_is_better": {task: {"uds": True}},
        "configs": {task: {
            "task": task,
            "provenance": provenance.task_record(data_read, options, None),
            "models": {dest: _model_record(getattr(args, dest), models[dest]) for dest, _ in ROLES},
            "per_layer": rows, "per_item": per_item, "skipped": skipped,
        }},
        "config": {"model": PRODUCER, "device": device},
        "total_evaluation_time_seconds": round(time.perf_counter() - started, 3),
        "date": time.time(),
    }
    with output_guard.replaced_folder(args.out) as folder:
        (folder / RESULTS_FILE).write_text(json.dumps(json_safe(result), indent=2), encoding="utf-8")
        depth_layers(rows, uds, folder / PLOT_FILE, f"{task}: UDS per layer")
    shown = "undefined (no knowledge-encoding layer in any question)" if uds is None else f"{uds:.4f}"
    print(f"UDS {shown} over {result['results'][task]['scored,none']} of {len(records)} questions "
          f"({len(skipped)} skipped, {result['results'][task]['without_ke_layer,none']} without a KE layer)")
    print(f"written: {Path(args.out) / RESULTS_FILE}, {Path(args.out) / PLOT_FILE}")
    return 0


def add_parsers(sub) -> None:
    from unlearn_methods.depth_items import PROMPT_FORMATS
    from unlearn_tasks.metrics.depth import TAU

    p = sub.add_parser(
        "depth", help="Unlearning Depth Score (UDS): is the forgotten answer still in the hidden states?",
        description="Two-stage activation patching (Lee, Kim and Jo 2026, gnueaj/unlearning-depth-score): per "
        "forget question and layer, the retain model's (stage 1) and the unlearned model's (stage 2) hidden states "
        "replace the target (full) model's at the answer positions; the drop of the answer's mean log-probability "
        "is measured. Layers where the retain model's drop exceeds --tau encode the answer; the UDS weighs the "
        "unlearned model's drop against the retain model's on them: 1 = erased as deeply as the retain model, "
        "0 = still recoverable from the hidden states.",
        formatter_class=DefaultsHelpFormatter)
    p.add_argument("--model", required=True, help="The unlearned model: folder, Hub id or LoRA adapter folder.")
    p.add_argument("--target", required=True, help="The model before unlearning (the release's full model).")
    p.add_argument("--retain", required=True, help="The model trained without the forget set.")
    p.add_argument("--data", default="tofu", help="TOFU, or a Hub id / folder in TOFU's schema.")
    p.add_argument("--forget", default="forget10", choices=["forget01", "forget05", "forget10"],
                   help="The forget split whose questions are scored.")
    p.add_argument("--data-dir", dest="data_dir", help="Local folder with the split's JSON (else the Hub).")
    p.add_argument("--entities", help="The release's entity annotations (tofu_data/forget10_filtered.json of "
                   "github.com/gnueaj/unlearning-depth-score, downloaded by hand: "
                   "question, prefix, entity): score the entity after the prefix, as the release does; questions "
                   "without one are skipped. Without it, the whole answer is scored.")
    p.add_argument("--prompt-format", dest="prompt_format", default="release", choices=PROMPT_FORMATS,
                   help="release: 'Question: q\\nAnswer:' as the release encodes it; plain: the TOFU tasks' "
                   "encoding; chat: the model's chat template as `unlearn run` trains in it.")
    p.add_argument("--states", default="hidden_states", choices=["hidden_states", "layer_output"],
                   help="hidden_states: the source's output_hidden_states, as the release patches (for the last layer "
                   "the state after the final norm, which the target normalises again); layer_output: every layer's "
                   "own output (patching a model's own states then changes nothing).")
    p.add_argument("--tau", type=float, default=TAU, help="Threshold on the stage-1 drop for a layer to count.")
    p.add_argument("--layers", default="all", help="Layers to patch: all, or e.g. 0-7,12.")
    p.add_argument("--limit", type=positive_int, help="Only the first N questions (the release's --num_examples).")
    p.add_argument("--batch-size", dest="batch_size", type=positive_int, default=8,
                   help="Questions per forward pass (memory only).")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                   help="Weights' dtype (the release runs bfloat16 on a GPU); log-probabilities are float32.")
    p.add_argument("--device", help="Device (default: cuda when a GPU is visible, else cpu).")
    p.add_argument("--out", default="uds", help=f"Output folder ({RESULTS_FILE}, {PLOT_FILE}).")
    p.add_argument("--quiet", action="store_true", help="No progress bar.")
    p.set_defaults(func=_cmd_depth)
    output_guard.declare(p, outputs=["out"], inputs=["model", "target", "retain", "entities", "data_dir"],
                         folders=["out"])
