"""``unlearn leaderboard validate|build``: check every submission of a leaderboard by recomputation; build its site."""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from pathlib import Path

from unlearn_app import output_guard
from unlearn_app.commands import error

ORDER = 56


@contextlib.contextmanager
def _local(source: str):
    """A local folder holding ``source``'s submissions (a Hub dataset is downloaded into a temporary folder)."""
    from unlearn_app.leaderboard import store

    if Path(source).is_dir():
        yield Path(source)
    elif store.is_hub_id(source):
        with tempfile.TemporaryDirectory() as tmp:
            yield store.download(source, tmp)
    else:
        raise store.StoreError(f"{source} is neither a folder nor a Hub dataset id OWNER/NAME")


def _checks(root: Path) -> list:
    """Every submission of ``root`` checked; one check per id (see :func:`~unlearn_app.leaderboard.validate.unique`)."""
    from unlearn_app.leaderboard.validate import check_folder, submission_folders, unique

    return unique([check_folder(f) for f in submission_folders(root)])


def _cmd_validate(args: argparse.Namespace) -> int:
    from unlearn_app.leaderboard.store import StoreError

    try:
        with _local(args.source) as root:
            checks = _checks(root)
            if not checks:
                return error(f"{args.source} holds no submission (submissions/<id>/submission.json)")
    except StoreError as e:
        return error(str(e))
    for c in checks:
        n = sum(len(v) for v in c.recomputed.values())
        u = sum(len(v) for v in c.unverified.values())
        if c.refused:
            print(f"REFUSED {c.errors[0]}")
            continue
        print(f"{c.status if c.ok else 'FAIL'} {c.id}: {n} recomputed, {u} unverified" + (
            "" if c.ok else f", {len(c.errors)} problem(s)"))
        for line in c.errors:
            print(f"  {line}")
        for line in c.notes:
            print(f"  note: {line}")
    counts = {s: sum(1 for c in checks if c.kind == s) for s in ("validated", "partly verified", "failed", "refused")}
    print(", ".join(f"{n} {s}" for s, n in counts.items()) + f" (of {len(checks)} submission(s))", file=sys.stderr)
    return 2 if counts["refused"] else 1 if counts["failed"] else 0


def _out_problem(out: Path) -> str | None:
    """Why ``--out`` may not take the site: it is (or holds) a submission folder."""
    from unlearn_app.leaderboard.submission import SUBMISSION_FILE

    if (out / SUBMISSION_FILE).exists() or any((out / "submissions").glob(f"*/{SUBMISSION_FILE}")):
        return f"--out {out} is a submission folder (or holds submissions); choose a folder of its own for the site"
    return None


def _cmd_build(args: argparse.Namespace) -> int:
    import os
    import shutil

    from unlearn_app.leaderboard.importers import ImportError_, import_table
    from unlearn_app.leaderboard.publish import install
    from unlearn_app.leaderboard.site import build_site
    from unlearn_app.leaderboard.store import StoreError

    out = Path(args.out)
    problem = _out_problem(out)
    if problem:
        return error(problem)
    try:
        imported = [row for path in args.imports or [] for row in import_table(path)]
    except (ImportError_, FileNotFoundError) as e:
        return error(str(e))
    try:
        with _local(args.source) as root:
            checks = _checks(root)
            if not checks and not imported:
                return error(f"{args.source} holds no submission and no --import was given: nothing to show")
            for c in checks:
                if c.refused:
                    print(f"skipped {c.errors[0]}", file=sys.stderr)
            out.mkdir(parents=True, exist_ok=True)
            staging = out / f".leaderboard-build-{os.getpid()}"  # everything written stays under --out
            shutil.rmtree(staging, ignore_errors=True)
            try:
                build_site(checks, imported, staging, title=args.title)
                _, removed = install(staging, out)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except StoreError as e:
        return error(str(e))
    shown = [c for c in checks if not c.refused]
    print(f"site: {out / 'index.html'} ({len(shown)} submission(s), {sum(c.validated for c in shown)} validated, "
          f"{len(checks) - len(shown)} skipped; {len(imported)} imported row(s)"
          + (f"; {len(removed)} file(s) of an earlier build removed)" if removed else ")"))
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("leaderboard", help="Validate a leaderboard's submissions by recomputation; build its static site.")
    lsub = p.add_subparsers(dest="leaderboard_command", required=True, metavar="{validate,build}")
    v = lsub.add_parser(
        "validate", help="Recompute every aggregate of every submission; exit 1 when any fails, 2 on bad input.",
        description="Check each submission of SOURCE (a Hub dataset OWNER/NAME or a local folder of `unlearn submit "
        "--to`): the schema, safe names and no symbolic links, the files' sha256 and the id's digest, then recompute "
        "every aggregate from its per-item values and the reference it names. One line per submission: validated "
        "(every number recomputed), partly verified (N of M), FAIL (one line per mismatch naming the number) or "
        "REFUSED (not a readable, safe submission). Exit 0 none fails, 1 one fails, 2 bad input (one is refused).")
    v.add_argument("source", metavar="OWNER/DATASET|DIR", help="The leaderboard's Hub dataset or local folder.")
    v.set_defaults(func=_cmd_validate)
    b = lsub.add_parser(
        "build", help="Build the static leaderboard site (tables, Pareto picture, a page per submission).",
        description="Validate every submission of --from and write a static site to --out: index.html with one "
        "sortable table per benchmark task, filters by model family and method, the forget-vs-utility picture with "
        "its Pareto front, and one page per submission with its provenance and the files its submission.json lists "
        "(nothing else of its folder). A refused submission is reported and skipped. --import adds rows of other "
        "leaderboards (marked unverifiable where they carry no per-item values). With --overwrite, the files an "
        "earlier build wrote that this one does not (a submission no longer on the board) are removed; no other file.")
    b.add_argument("--from", dest="source", required=True, metavar="OWNER/DATASET|DIR",
                   help="The leaderboard's Hub dataset or local folder.")
    b.add_argument("--out", required=True, metavar="SITE", help="Folder to write the site into.")
    b.add_argument("--import", dest="imports", action="append", metavar="FILE_OR_DIR",
                   help="Rows from another leaderboard (repeatable): a TOFU leaderboard CSV, a MUSE leaderboard CSV, "
                   "an open-unlearning result folder, or an `unlearn sweep` leaderboard.json.")
    b.add_argument("--title", default="Unlearning leaderboard", help="The site's title.")
    b.set_defaults(func=_cmd_build)
    output_guard.declare(b, outputs=["out"], inputs=["imports", "source"], folders=["out"])
