"""``unlearn push``: upload a checkpoint folder to the Hugging Face Hub."""

from __future__ import annotations

import argparse
from pathlib import Path

from unlearn_app.commands import error

ORDER = 50


def _cmd_push(args: argparse.Namespace) -> int:
    from unlearn_app.checkpoint.hub import HubUploadError, check_pushable, push_folder

    try:
        check_pushable(args.folder)  # before the model card is written into it, and before torch is imported
    except HubUploadError as e:
        return error(str(e))
    from unlearn_app.pipeline import write_model_index

    if Path(args.folder, "eval").is_dir() and write_model_index(Path(args.folder), args.repo.split("/")[-1]):
        print(f"model card: evaluation results of {Path(args.folder, 'eval')} written as model-index")
    try:
        print(push_folder(args.folder, args.repo, private=not args.public))
    except HubUploadError as e:
        return error(str(e))
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("push", help="Upload a checkpoint folder to the Hugging Face Hub (or resume a failed upload).")
    p.add_argument("folder", help="Checkpoint folder written by `unlearn run`.")
    p.add_argument("--repo", required=True, help="Hub repo id, e.g. me/tofu-npo.")
    p.add_argument("--public", action="store_true", help="Create the repo public (default private).")
    p.set_defaults(func=_cmd_push)
