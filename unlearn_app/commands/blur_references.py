"""``unlearn blur-references``: the base model's own answers to BLUR's queries, the references its tasks score
against, written once with their provenance (:mod:`unlearn_tasks.blur.references`)."""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

from unlearn_app import output_guard
from unlearn_app.argtypes import positive_int
from unlearn_app.commands import DefaultsHelpFormatter, error

ORDER = 84


def _model_revision(model: str) -> str | None:
    """The Hub commit of a model id, or of the snapshot a local folder was downloaded as (None if unknown)."""
    path = Path(model).expanduser()
    if path.is_dir():
        parts = path.resolve().parts
        return parts[parts.index("snapshots") + 1] if "snapshots" in parts[:-1] else None
    try:
        from huggingface_hub import model_info

        return model_info(model).sha
    except Exception:  # offline or private: the revision stays unknown rather than failing the run
        return None


def write_blur_references(model: str, out: Path, sources: list[str], data_dir: str | None = None,
                          batch_size: int | str = 16, device: str | None = None, max_tokens: int = 100,
                          apply_chat_template: bool = False, limit: int | None = None) -> Path:
    """Generate the base model's answers to the ``sources``' BLUR queries with the BLUR tasks themselves
    (``blur_generate_only``), and write ``out/blur_references.json``; returns its path."""
    import lm_eval

    from harness_ext.evaluate import run_lm_eval
    from harness_ext.provenance import software
    from unlearn_tasks.blur.options import BlurOptions
    from unlearn_tasks.blur.references import FILE_NAME, generation_settings, write_references

    metadata = {"blur_generate_only": True, "blur_max_tokens": max_tokens}
    if data_dir:
        metadata["data_dir"] = data_dir
    tasks = [f"blur_{s}" for s in sources]
    res = run_lm_eval(model, tasks, None, metadata, batch_size=batch_size, device=device, limit=limit,
                      apply_chat_template=apply_chat_template)
    out.mkdir(parents=True, exist_ok=True)
    answers: dict[str, list[dict[str, str]]] = {}
    data: list[dict] = []
    for task in tasks:
        answers.update(res["configs"][task]["blur_answers"])
        data += res["configs"][task]["provenance"].get("data", [])
    settings = generation_settings(BlurOptions(blur_source=sources[0], blur_generate_only=True,
                                               blur_max_tokens=max_tokens), apply_chat_template)
    provenance = {"model": model, "model_revision": _model_revision(model),
                  "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                  "sources": sources, "limit": limit, "lm_eval": lm_eval.__version__, **software(), "data": data}
    path = out / FILE_NAME
    with output_guard.atomic_path(path) as tmp:
        write_references(tmp, answers, settings, provenance)
    return path


def _cmd(args: argparse.Namespace) -> int:
    from unlearn_tasks.blur.options import SOURCES
    from unlearn_tasks.dataset_loader import DataError

    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    unknown = [s for s in sources if s not in SOURCES]
    if unknown or not sources:
        return error(f"--sources: {', '.join(unknown) or 'nothing'} is not a BLUR source; give some of "
                     f"{','.join(SOURCES)}.")
    if args.data_dir and not Path(args.data_dir).expanduser().is_dir():  # before the model loads
        return error(f"--data-dir {args.data_dir} is not a folder; give a local copy of forgelab/BLUR in the Hub's "
                     "layout, or leave it out to read the Hub.")
    try:
        path = write_blur_references(args.model, Path(args.out), sources, args.data_dir, args.batch_size,
                                     args.device, args.max_tokens, args.apply_chat_template, args.limit)
    except (DataError, ValueError, OSError) as e:
        return error(str(e))
    from unlearn_tasks.blur.task import scorable

    answers = json.loads(path.read_text())["answers"]
    counts = {k: len(v) for k, v in answers.items()}
    wordless = sum(not scorable(r["answer"]) for rows in answers.values() for r in rows)
    print(f"Wrote {path} ({sum(counts.values())} answers: {', '.join(f'{k} {n}' for k, n in counts.items())}"
          f"{f'; {wordless} hold no word and will not be scored' if wordless else ''}). "
          f"Evaluate with: lm_eval --tasks blur --metadata '{{\"blur_references\": \"{path}\"}}'")
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("blur-references", help="Write the base model's answers to BLUR's queries (the references its "
                       "tasks score against), with their provenance.", formatter_class=DefaultsHelpFormatter,
                       description="BLUR scores an unlearned model's answer by ROUGE-L recall against the base "
                       "model's own answer to the same query. This runs the BLUR tasks on the base model (greedy, the "
                       "release's prompt and budget) and writes OUT/blur_references.json: per query the answer, and "
                       "the model, its revision, the date, the settings and the data read. Pass it to the tasks with "
                       "--metadata '{\"blur_references\": \"OUT\"}'.")
    p.add_argument("--model", required=True, help="The base model (a Hub id or a local folder), before unlearning.")
    p.add_argument("--out", required=True, help="Folder for blur_references.json.")
    p.add_argument("--sources", default="rwku,whp,wmdp,tofu", help="BLUR sources to answer (comma-separated).")
    p.add_argument("--data-dir", dest="data_dir", help="A local copy of forgelab/BLUR in the Hub's layout.")
    p.add_argument("--max-tokens", dest="max_tokens", type=positive_int, default=100,
                   help="New tokens per answer (the release's 100); the tasks' blur_max_tokens must match.")
    p.add_argument("--apply-chat-template", dest="apply_chat_template", action="store_true",
                   help="Answer through the model's chat template (evaluate with --apply_chat_template too).")
    p.add_argument("--batch-size", dest="batch_size", type=positive_int, default=16)
    p.add_argument("--device", help="Torch device (default: cuda if visible, else cpu).")
    p.add_argument("--limit", type=positive_int, help="Only the first N queries of each task (smoke runs; the "
                   "tasks then need the same limit).")
    p.set_defaults(func=_cmd)
    output_guard.declare(p, outputs=["out"], inputs=["model", "data_dir"], folders=["out"])
