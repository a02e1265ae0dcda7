"""``unlearn watermark``, ``unlearn verify`` and ``unlearn waterdrum report``: WaterDrum for data owners and
model owners."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from unlearn_app import output_guard
from unlearn_app.argtypes import float_range, int_range, positive_float, positive_int, seed_int
from unlearn_app.commands import InputError, error, model_problem
from unlearn_app.reports.numbers import MISSING, format_number

ORDER = 60

INSTALL_HINT = 'pip install "lm-eval-unlearning[waterdrum]"'


def read_jsonl(path: str | Path, field: str) -> tuple[list[dict], list[str]]:
    """Records and their ``field`` strings; :class:`InputError` naming the line for anything else."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path} does not exist")
    from unlearn_tasks.dataset_loader import read_json_lines

    records, texts = [], []
    for n, _, record in read_json_lines(path, error=lambda n, e: InputError(f"{path}: line {n} is not valid JSON ({e.msg})")):
        if not isinstance(record, dict) or field not in record:
            raise InputError(f"{path}: line {n} has no {field!r} field (each line must be a JSON object with a "
                             f"{field!r} string; --field picks another field)")
        if not isinstance(record[field], str):
            raise InputError(f"{path}: line {n}: {field!r} must be a string, got {type(record[field]).__name__}")
        records.append(record)
        texts.append(record[field])
    if not records:
        raise InputError(f"{path} holds no records")
    return records, texts


def _tokenizer(name: str | None) -> Any:
    from unlearn_tasks.waterdrum.tokenizer import TokenizerUnavailable, load_tokenizer

    try:
        return load_tokenizer(name)
    except TokenizerUnavailable as e:
        hint = "" if INSTALL_HINT.split('"')[1] in str(e) else f" (the default Llama-3 tokenizer: {INSTALL_HINT})"
        raise InputError(f"{e}{hint}") from e


# --------------------------------------------------------------------------- unlearn verify
def _cmd_verify(args: argparse.Namespace) -> int:
    import numpy as np

    from unlearn_tasks.waterdrum.owners import parse_ids
    from unlearn_tasks.waterdrum.verify import verify_texts

    try:
        ids = parse_ids(args.ids)
        _, texts = read_jsonl(args.input, args.field)
        encoder = _tokenizer(args.tokenizer)
        scores, lengths = verify_texts(texts, ids, args.k_p, tokenizer=encoder, vocab_size=args.vocab_size,
                                       workers=args.workers, return_lengths=True)
    except (InputError, ValueError, TypeError) as e:
        return error(str(e))
    scores = scores[:, :, 0]
    pooled = (scores * lengths[:, None]).sum(0) / max(int(lengths.sum()), 1)
    print(f"# tokenizer: {encoder.name}, vocabulary N = {args.vocab_size or encoder.vocab_size}, k_p = {args.k_p}")
    print("\t".join(["line", "tokens", *[f"id {i}" for i in ids], "best"]))
    for n, (row, length) in enumerate(zip(scores, lengths), 1):
        print("\t".join([str(n), str(int(length)), *[f"{s:.4f}" for s in row], str(ids[int(np.argmax(row))])]))
    print("\t".join(["all", str(int(lengths.sum())), *[f"{s:.4f}" for s in pooled], str(ids[int(np.argmax(pooled))])]))
    if args.out:
        out = {
            "tokenizer": encoder.name, "vocab_size": int(args.vocab_size or encoder.vocab_size), "k_p": args.k_p,
            "ids": ids,
            "texts": [{"line": n, "tokens": int(length), "scores": {str(i): float(s) for i, s in zip(ids, row)},
                       "best_id": ids[int(np.argmax(row))]} for n, (row, length) in enumerate(zip(scores, lengths), 1)],
            "pooled": {str(i): float(s) for i, s in zip(ids, pooled)},
        }
        output_guard.write_text(args.out, json.dumps(out, indent=2) + "\n")
        print(f"scores written to {args.out}", file=sys.stderr)
    return 0


# --------------------------------------------------------------------------- unlearn watermark
def _cmd_watermark(args: argparse.Namespace) -> int:
    from unlearn_tasks.waterdrum.owners import check_owner_id

    try:  # the id and the input file are checked before torch and transformers are imported
        owner = check_owner_id(args.id)
        records, texts = read_jsonl(args.input, args.field)
        questions = None
        if args.question_field:
            missing = [n for n, r in enumerate(records, 1) if not isinstance(r.get(args.question_field), str)]
            if missing:
                raise InputError(f"{args.input}: record {missing[0]} has no {args.question_field!r} string")
            questions = [r[args.question_field] for r in records]
        if model_problem(args.model):
            raise InputError(model_problem(args.model))
    except (InputError, ValueError, TypeError) as e:
        return error(str(e))
    import torch
    from tqdm import tqdm
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from unlearn_tasks.waterdrum.verify import perturbation_key, verify_texts
    from unlearn_tasks.waterdrum.watermark import watermark_texts

    if args.seed is not None:
        torch.manual_seed(args.seed)
    try:
        tokenizer = AutoTokenizer.from_pretrained(args.model)
        dtype = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=dtype).to(device).eval()
        n = int(args.vocab_size or tokenizer.vocab_size)
        perturbation_key(args.k_p, n)
    except (OSError, ValueError, TypeError) as e:
        return error(f"cannot use paraphraser {args.model!r}: {e}")
    out: list[str] = []
    chunk = max(args.batch_size, 1)
    with tqdm(total=len(texts), desc=f"Watermarking (id {owner})", unit="text", disable=args.quiet) as bar:
        for start in range(0, len(texts), chunk):
            qs = questions[start : start + chunk] if questions is not None else None
            out += watermark_texts(model, tokenizer, texts[start : start + chunk], owner, args.kappa, args.k_p,
                                   questions=qs, vocab_size=n, do_sample=args.sample, num_beams=args.num_beams,
                                   temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.max_new_tokens,
                                   batch_size=chunk)
            bar.update(len(out) - bar.n)
    with output_guard.atomic_path(args.output) as tmp, tmp.open("w", encoding="utf-8") as f:
        for record, text in zip(records, out):
            row = {**record, args.field: text, f"{args.field}_original": record[args.field],
                   "watermark_id": owner, "watermark_kappa": args.kappa, "watermark_k_p": args.k_p}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    scores, lengths = verify_texts(out, [owner], args.k_p, tokenizer=tokenizer, vocab_size=n, return_lengths=True)
    pooled = float((scores[:, 0, 0] * lengths).sum() / max(int(lengths.sum()), 1))
    print(f"{len(out)} texts watermarked with id {owner} (kappa {args.kappa}, k_p {args.k_p}) -> {args.output}")
    print(f"self-check with the paraphraser's tokenizer: mean score under id {owner} = {pooled:.4f} "
          f"(0 = no watermark; verify with the tokenizer your verifier uses, e.g. `unlearn verify --ids {owner}`)")
    return 0


# --------------------------------------------------------------------------- unlearn waterdrum report
def _parse_fractions(items: list[str] | None) -> dict[str, float]:
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        try:
            if not sep:
                raise ValueError
            out[name.strip()] = float(value)
        except ValueError:
            raise InputError(f"--fraction expects NAME=FRACTION (e.g. half=0.5), got {item!r}") from None
    return out


def load_runs(paths: list[str], names: list[str], task: str | None) -> dict[str, dict]:
    """``{name: record}`` from lm-eval output folders / results files (or a JSON file holding one record)."""
    from harness_ext.results import ResultsFileError, latest_results_file
    from unlearn_tasks.waterdrum.runs import records_in_results

    out = {}
    for name, path in zip(names, paths):
        try:
            data = json.loads(latest_results_file(path).read_text())
        except (FileNotFoundError, json.JSONDecodeError, ResultsFileError) as e:
            raise InputError(f"run {name!r}: {e}") from None
        records = records_in_results(data) or ({"": data} if data.get("format", "").startswith("lm-eval-unlearning/waterdrum") else {})
        if not records:
            raise InputError(f"run {name!r}: {path} holds no WaterDrum task results (run lm_eval with "
                             f"--tasks waterdrum_ax or waterdrum_tofu and --output_path)")
        if task is None and len(records) > 1:
            raise InputError(f"run {name!r} holds several WaterDrum tasks {sorted(records)}; pick one with --task")
        if task is not None and task not in records:
            raise InputError(f"run {name!r} has no task {task!r}; it has {sorted(records)}")
        out[name] = records[task] if task is not None else next(iter(records.values()))
    return out


def _cmd_report(args: argparse.Namespace) -> int:
    from unlearn_tasks.waterdrum.meta_eval import build_report, write_report
    from unlearn_tasks.waterdrum.runs import BASELINE_SIGN, model_run

    names = args.names.split(",") if args.names else [Path(p).stem if Path(p).is_file() else Path(p).name for p in args.runs]
    try:
        if len(names) != len(args.runs) or len(set(names)) != len(names):
            raise InputError(f"need {len(args.runs)} distinct run names, got {names} (--names a,b,c)")
        fractions = _parse_fractions(args.fraction)
        for key, label in ((args.original, "--original"), (args.retrained, "--retrained"), *((k, "--fraction") for k in fractions)):
            if key is not None and key not in names:
                raise InputError(f"{label} names {key!r}, which is not a run ({', '.join(names)})")
        records = load_runs(args.runs, names, args.task)
        roles = {args.original: "original", args.retrained: "retrained"}

        def runs_for(metric: str) -> list:
            return [model_run(n, records[n], roles.get(n), fractions.get(n), metric) for n in names]

        report = build_report(runs_for("waterdrum"), args.scale)
    except (InputError, ValueError, KeyError) as e:
        return error(str(e))
    baselines: dict[str, Any] = {}
    for metric in BASELINE_SIGN:
        if all(metric in r.get("baselines", {}) for r in records.values()):
            try:
                baselines[metric] = build_report(runs_for(metric), args.scale)
            except ValueError as e:
                baselines[metric] = {"error": str(e)}
    report["baselines"] = baselines
    report["tasks"] = {n: r.get("task") for n, r in records.items()}

    print("| run | role | fraction trained | forget | retain | forget (scaled) | retain (scaled) | AUROC |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for row in report["runs"]:
        print(f"| {row['name']} | {row['role'] or ''} | {format_number(row['fraction_trained'])} | {format_number(row['forget'])} | "
              f"{format_number(row['retain'])} | {format_number(row['forget_scaled'])} | {format_number(row['retain_scaled'])} | {format_number(row['auroc'])} |")
    cal = report["calibration"]
    print(f"\nWaterDrum D1 separability (AUROC of the retrained model): {format_number(report['separability_auroc'])}")
    print(f"WaterDrum D2 calibration R^2: {format_number(cal['r2']) if cal else MISSING + ' (give --fraction for two or more runs)'}")
    for metric, rep in baselines.items():
        if "error" in rep:
            print(f"{metric}: {rep['error']}")
        else:
            c = rep["calibration"]
            print(f"{metric}: D1 AUROC {format_number(rep['separability_auroc'])}, D2 R^2 {format_number(c['r2']) if c else '-'}")
    if args.out:
        paths = write_report(report, args.out)
        print(f"\nreport: {paths['json']}\nplot: {paths['png']}")
    return 0


# --------------------------------------------------------------------------- parsers
def add_parsers(sub: Any) -> None:
    """Add ``watermark``, ``verify`` and ``waterdrum`` to the ``unlearn`` command."""
    p = sub.add_parser("watermark", help="Watermark a JSONL file's texts with your owner id (Waterfall, as WaterDrum).",
                       description="Paraphrase every text with a language model while adding the owner's Waterfall "
                       "perturbation to its logits; writes the records back with the watermarked text.")
    p.add_argument("--id", type=int_range(0, 2**32 - 1), required=True, help="Your owner id (0 .. 2**32-1).")
    p.add_argument("--kappa", type=positive_float, default=2.0, help="Watermark strength (logit offset; default 2, as WaterDrum).")
    p.add_argument("--k-p", dest="k_p", type=int, default=1, help="Perturbation key (default 1, as WaterDrum).")
    p.add_argument("--model", required=True, help="Paraphraser: Hub id or local folder of a causal LM (WaterDrum: "
                   "meta-llama/Meta-Llama-3.1-8B-Instruct).")
    p.add_argument("--in", dest="input", required=True, help="JSON lines, one object with a text field per line.")
    p.add_argument("--out", dest="output", required=True, help="Output JSON lines.")
    p.add_argument("--field", default="text", help="Field holding the text (default: text).")
    p.add_argument("--question-field", help="Field with a question: paraphrase the text as its answer (Q/A data).")
    p.add_argument("--vocab-size", type=positive_int, help="Watermark vocabulary N (default: the tokenizer's base vocabulary).")
    p.add_argument("--batch-size", type=positive_int, default=4, help="Texts per generate call (default 4).")
    p.add_argument("--max-new-tokens", type=positive_int, help="Generation budget (default: 2x the text's tokens + 32, max 1000).")
    p.add_argument("--sample", action="store_true", help="Sample instead of beam search.")
    p.add_argument("--num-beams", type=positive_int, default=4, help="Beams without --sample (default 4).")
    p.add_argument("--temperature", type=positive_float, default=1.0, help="With --sample (default 1).")
    p.add_argument("--top-p", type=float_range(0.0, 1.0, low_open=True), help="With --sample.")
    p.add_argument("--device", help="torch device (default: cuda if available, else cpu).")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16", "float16"])
    p.add_argument("--seed", type=seed_int, help="torch seed (for --sample).")
    p.add_argument("--quiet", action="store_true", help="Hide the progress bar.")
    p.set_defaults(func=_cmd_watermark)
    output_guard.declare(p, outputs=["output"], inputs=["input", "model"])

    p = sub.add_parser("verify", help="Watermark scores of texts (JSONL) under owner ids.",
                       description="Score every text under every owner id: mean cos of the keyed positions (0 = no "
                       "watermark, about 0.7 for text sampled uniformly with kappa 2). Prints one row per text and "
                       "a token-weighted pooled row.")
    p.add_argument("--ids", required=True, help="Owner ids, e.g. 0-19 or 3,7,10-12.")
    p.add_argument("--in", dest="input", required=True, help="JSON lines with a text field.")
    p.add_argument("--field", default="text", help="Field holding the text (default: text).")
    p.add_argument("--tokenizer", help="Hugging Face tokenizer name or folder (default: Llama-3, WaterDrum's; "
                   f"offline from {INSTALL_HINT}).")
    p.add_argument("--k-p", dest="k_p", type=int, default=1, help="Perturbation key (default 1).")
    p.add_argument("--vocab-size", type=positive_int, help="Watermark vocabulary N (default: the tokenizer's base vocabulary).")
    p.add_argument("--workers", type=positive_int, help="Processes (default: all cores).")
    p.add_argument("--out", help="Also write the scores as JSON.")
    p.set_defaults(func=_cmd_verify)
    output_guard.declare(p, outputs=["out"], inputs=["input", "tokenizer"])

    p = sub.add_parser("waterdrum", help="WaterDrum meta-evaluation (`unlearn waterdrum report`).")
    wsub = p.add_subparsers(dest="waterdrum_command", metavar="COMMAND", required=True)
    r = wsub.add_parser("report", help="D1 AUROC, D2 calibration R^2 and the evaluation plot over lm-eval runs.",
                        description="Read the WaterDrum records of several lm-eval runs (waterdrum_ax / waterdrum_tofu, "
                        "--output_path), scale strengths by the original model's, and report D1 separability (AUROC "
                        "of the retrained model's forget vs retain scores), D2 calibration (R^2 of strength = m * "
                        "fraction trained, through the origin) and the baselines' D1/D2.")
    r.add_argument("runs", nargs="+", metavar="RUN", help="lm-eval output folders or results_*.json files.")
    r.add_argument("--names", help="Comma-separated run names (default: folder names).")
    r.add_argument("--original", help="Name of the original model (trained on everything).")
    r.add_argument("--retrained", help="Name of the model retrained without the forget data.")
    r.add_argument("--fraction", action="append", metavar="NAME=F",
                   help="Fraction of the forget data still trained in run NAME (0..1), for D2; repeatable.")
    r.add_argument("--scale", default="original", choices=["original", "minmax", "none"],
                   help="original: divide by the original model's strength (default); minmax: original 1, retrained 0.")
    r.add_argument("--task", help="The WaterDrum task to read when a run holds several.")
    r.add_argument("--out", help="Folder for waterdrum_report.json and waterdrum_report.png.")
    r.set_defaults(func=_cmd_report)
    output_guard.declare(r, outputs=["out"], scanned={"runs": ("results*.json",)}, folders=["out"],
                         contents={"out": ("waterdrum_report.json", "waterdrum_report.png")})

