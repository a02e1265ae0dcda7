"""Validation by recomputation: every aggregate of a submission recomputed from its per-item values.

First the submission is read as untrusted (:mod:`.untrusted`): a folder named by a submission id, no symbolic link,
``submission.json`` following the schema, every file it names a plain relative name, every task name a plain name.
A submission that fails any of these is *refused* (one line; :attr:`Check.refused`): not shown, nothing of it
published. Then the hashes: every listed file's sha256, the id's digest, the reference's digest.

For each task with per-item values, the values (an open-unlearning ``<BENCH>_EVAL.json``, with every stored
aggregate taken out) are read by :func:`unlearn_app.open_unlearning.reader.read_benchmark`, the reader ``unlearn
report`` and ``unlearn ci --from-results`` use: means, truth-ratio aggregates and MIA AUROCs from the items, Model
Utility from its nine parts, Forget Quality and PrivLeak against the submission's reference. The benchmark comes from
the task name (``tofu_*`` is TOFU, ``muse_*`` MUSE), never from the record. A recomputed number that differs from the
submitted one (relative tolerance :data:`~unlearn_app.open_unlearning.reader.TOLERANCE`) is a mismatch; a submitted
number with nothing to recompute it from is *unverified*. A submission is ``validated`` only when every number it
shows was recomputed and agrees; with unverified numbers it is ``partly verified (N of M)``.
Every other number of a task that carries lm-eval's samples file is recomputed from it with the task's own
aggregation (:func:`recompute_samples`, :mod:`unlearn_app.leaderboard.recompute`): every benchmark, groups included.
An ``unlearn depth`` task's UDS (overall and per question) is recomputed from its per-layer scores with the
command's own score function (:mod:`unlearn_app.leaderboard.depth`); an ``unlearn judge`` task's verdict records are
re-derived from their replies, answers and the judged run's samples first (:mod:`unlearn_app.leaderboard.judged`).
A partial evaluation (``lm_eval --limit``: the record's ``limit`` and ``documents``) is refused.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unlearn_app.leaderboard import untrusted
from unlearn_app.leaderboard.items import recompute
from unlearn_app.leaderboard.submission import SCHEMA_FILE, SUBMISSION_FILE, digest, schema_errors, sha256

#: A submission id (and so the name of its folder): the schema's pattern.
ID = re.compile(json.loads(SCHEMA_FILE.read_text())["properties"]["id"]["pattern"])


class Refused(ValueError):
    """A submission that cannot be read safely or is not one; the message is one line."""


#: The result fields that name lm-eval samples files (recomputed by :func:`recompute_samples`).
SAMPLE_KEYS = ("samples", "reference_samples")


@dataclass
class Check:
    """What validation found for one submission."""

    id: str
    folder: str
    errors: list[str] = field(default_factory=list)
    recomputed: dict[str, dict[str, float]] = field(default_factory=dict)  # task -> metric -> recomputed value
    unverified: dict[str, list[str]] = field(default_factory=dict)  # task -> metrics with no per-item values
    mismatched: dict[str, list[str]] = field(default_factory=dict)  # task -> metrics the recomputation contradicts
    notes: list[str] = field(default_factory=list)  # why numbers stay unverified, where a line can say it
    record: dict[str, Any] | None = None  # submission.json, once it reads and follows the schema
    refused: bool = False  # not a readable, safe submission: not shown, nothing published
    #: sha256 of each file as validation read it (submission.json and the listed files whose hash matched): what
    #: :func:`~unlearn_app.leaderboard.publish.publish` may copy, and only while its bytes still have this hash
    hashes: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No problem found (the numbers that were recomputed agree); see :attr:`status` for how much was."""
        return not self.errors

    @property
    def shown(self) -> int:
        """How many numbers the submission shows (its aggregates)."""
        return sum(len(e.get("aggregates") or {}) for e in ((self.record or {}).get("results") or {}).values())

    @property
    def verified(self) -> int:
        """How many of them were recomputed and agree."""
        return sum(len(set(v) - set(self.mismatched.get(t, []))) for t, v in self.recomputed.items())

    @property
    def validated(self) -> bool:
        return self.ok and self.shown > 0 and self.verified == self.shown

    @property
    def kind(self) -> str:
        """:attr:`status` without its counts: ``refused``, ``failed``, ``validated`` or ``partly verified``."""
        return self.status.split(" (")[0]

    @property
    def status(self) -> str:
        """``refused``, ``failed``, ``validated`` or ``partly verified (N of M)``."""
        if self.refused:
            return "refused"
        if not self.ok:
            return "failed"
        return "validated" if self.validated else f"partly verified ({self.verified} of {self.shown})"


def benchmark_of(task: str) -> str | None:
    """TOFU / MUSE from the task name; the record's ``benchmark`` is not trusted."""
    from unlearn_app.open_unlearning.writer import benchmark_of as of_task

    return of_task(task)


def _agree(a: float, b: float) -> bool:
    from unlearn_app.open_unlearning.reader import TOLERANCE

    return math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=1e-12)


# --------------------------------------------------------------------------- reading it
def partial_of(task: str, entry: dict[str, Any]) -> str | None:
    """How much of ``task`` a result entry says was evaluated when it is not all of it (its ``limit`` and
    ``documents``, read by the rule of :func:`harness_ext.results.partial_tasks`); None for a whole evaluation."""
    from harness_ext.results import partial_tasks

    return partial_tasks({"config": {"limit": entry.get("limit")}, "n-samples": {task: entry.get("documents")},
                          "results": {task: {}}}).get(task)


def _named_files(record: dict[str, Any]) -> set[str]:
    return {e.get(k) for e in record["results"].values() for k in ("items", "reference", "depth", *SAMPLE_KEYS)} - {None}


def read_record(folder: Path) -> tuple[dict[str, Any], str]:
    """``submission.json`` of ``folder``, checked before any other file is read (see the module docstring), and the
    sha256 of its bytes; :class:`Refused` otherwise."""
    if not ID.fullmatch(folder.name):
        raise Refused(f"the folder name {folder.name[:80]!r} is no submission id (<model>-<method>-<12 hex>)")
    link = untrusted.first_link(folder)
    if link is not None:
        raise Refused(f"{link} is a symbolic link; a submission holds regular files only")
    try:
        data = untrusted.read_bytes(folder, SUBMISSION_FILE)
        record = untrusted.parse_json(data, SUBMISSION_FILE)
        bad = schema_errors(record)
    except untrusted.Unreadable as e:
        raise Refused(str(e)) from None
    except RecursionError:
        raise Refused(f"{SUBMISSION_FILE} is nested too deeply to be read") from None
    if bad:
        raise Refused(f"{SUBMISSION_FILE} does not follow the schema: {bad[0]}"
                      + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""))
    if record["id"] != folder.name:
        raise Refused(f"its {SUBMISSION_FILE} says id {record['id']}; a submission's folder is named by its id")
    for task, entry in record["results"].items():
        if not untrusted.TASK.fullmatch(task):
            raise Refused(f"the task name {task[:80]!r} is not a plain name (letters, digits, . _ -)")
        cut = partial_of(task, entry)
        if cut:
            raise Refused(f"{task} is a partial evaluation: {cut}; the board shows whole evaluations only: rerun "
                          "lm_eval without --limit")
        said, derived = entry.get("benchmark"), benchmark_of(task)
        if said is not None and said != derived:
            raise Refused(f"{task} says benchmark {said}, but the task is {derived or 'neither TOFU nor MUSE'}")
    for rel in sorted(set(record["files"]) | _named_files(record), key=str):
        problem = untrusted.name_problem(rel)
        if problem:
            raise Refused(problem)
    return record, sha256(data)


def _integrity(folder: Path, record: dict[str, Any]) -> tuple[list[str], dict[str, bytes]]:
    """Problems with the id's digest, the listed files' hashes and the reference's digest; the files that match."""
    from unlearn_app.leaderboard.reference import files_digest

    errors = []
    if not record["id"].endswith(digest(record)[:12]):
        errors.append(f"the id's digest is not that of the content ({digest(record)[:12]}): submission.json was "
                      "edited after it was built")
    good: dict[str, bytes] = {}
    for rel, expected in sorted(record["files"].items()):
        try:
            data = untrusted.read_bytes(folder, rel)
        except untrusted.Unsafe as e:
            raise Refused(str(e)) from None
        except untrusted.Unreadable as e:
            errors.append(str(e))
            continue
        if sha256(data) != expected:
            errors.append(f"{rel} has sha256 {sha256(data)[:12]}, the submission records {expected[:12]}")
        else:
            good[rel] = data
    for rel in sorted(_named_files(record) - set(record["files"])):
        errors.append(f"{rel} is named by a result but not listed (with its hash) in files")
    refs = {e["reference"] for e in record["results"].values() if e.get("reference")}
    if refs:
        said = (record.get("reference") or {}).get("sha256")
        if said != files_digest({rel: record["files"].get(rel, "") for rel in refs}):
            errors.append("reference.sha256 is not the digest of the reference files it holds "
                          f"({', '.join(sorted(refs))})")
    return errors, good


# --------------------------------------------------------------------------- recomputing it
def _check_task(check: Check, task: str, entry: dict[str, Any], files: dict[str, bytes]) -> None:
    """Recompute one task's aggregates from its per-item values (and the reference), into ``check``."""
    from unlearn_app.leaderboard.reference import near_copy
    from unlearn_app.open_unlearning.reader import OuFolderError

    claimed = entry["aggregates"]
    if entry.get("depth"):
        _check_depth(check, task, entry, files)
        return
    bench = benchmark_of(task)
    if not entry.get("items") or bench is None:
        check.unverified[task] = sorted(claimed)
        return
    try:
        items = untrusted.parse_json(files[entry["items"]], entry["items"])
        reference = untrusted.parse_json(files[entry["reference"]], entry["reference"]) if entry.get("reference") else None
    except untrusted.Unreadable as e:
        raise Refused(str(e)) from None
    shared = near_copy(bench, items, reference) if reference is not None else None
    if shared:
        check.errors.append(f"{check.id}: {task}: the reference holds {shared} of the run itself (to a relative "
                            "1e-6): it is no distinct evaluation, so Forget Quality and PrivLeak against it mean "
                            "nothing; submit with the retain model's evaluation")
        return
    try:
        values = recompute(bench, task, items, reference)
    except OuFolderError as e:
        check.errors.append(f"{check.id}: {task}: cannot recompute ({e})")
        return
    for metric, value in sorted(claimed.items()):
        again = values.get(metric, math.nan)
        if math.isnan(again):
            check.unverified.setdefault(task, []).append(metric)
            continue
        check.recomputed.setdefault(task, {})[metric] = again
        if not _agree(float(value), again):
            check.mismatched.setdefault(task, []).append(metric)
            check.errors.append(f"{check.id}: {task}/{metric} = {value:.6g} submitted, but {again:.6g} "
                                "recomputed from its per-item values"
                                + (" and the reference" if metric in ("forget_quality", "privleak") else ""))


def _check_depth(check: Check, task: str, entry: dict[str, Any], files: dict[str, bytes]) -> None:
    """``unlearn depth``'s aggregates and per-question UDS recomputed from its per-layer scores (:mod:`.depth`), at
    the threshold of the task's recorded options (missing or out of range: refused)."""
    from unlearn_app.leaderboard import depth

    try:
        tau = depth.threshold_of((entry.get("provenance") or {}).get("metric_modes"))
        content = untrusted.parse_json(files[entry["depth"]], entry["depth"])
    except (depth.DepthError, untrusted.Unreadable) as e:
        raise Refused(f"{task}: {e}" if isinstance(e, depth.DepthError) else str(e)) from None
    try:
        again = depth.recompute(content, tau)
    except depth.DepthError as e:
        check.errors.append(f"{check.id}: {task}: cannot recompute the UDS from {entry['depth']} ({e})")
        return
    check.errors += [f"{check.id}: {task}: {line}" for line in again.item_mismatches]
    for metric, value in sorted(entry["aggregates"].items()):
        if metric not in depth.AGGREGATES:
            check.unverified.setdefault(task, []).append(metric)
            continue
        recomputed = again.values.get(metric)  # None: the UDS is undefined (no question has a KE layer)
        if recomputed is not None:
            check.recomputed.setdefault(task, {})[metric] = recomputed
        if recomputed is None or not _agree(float(value), recomputed):
            check.mismatched.setdefault(task, []).append(metric)
            shown = "undefined (no question has a KE layer)" if recomputed is None else f"{recomputed:.6g}"
            check.errors.append(f"{check.id}: {task}/{metric} = {value:.6g} submitted, but {shown} recomputed from "
                                f"its per-layer scores ({entry['depth']})")


def check_folder(folder: str | Path) -> Check:
    """Validate the submission in ``folder`` (see the module docstring)."""
    folder = Path(folder)
    check = Check(folder.name, str(folder))
    try:
        record, record_sha = read_record(folder)
        check.record = record
        errors, files = _integrity(folder, record)
        check.hashes = {SUBMISSION_FILE: record_sha, **{rel: sha256(data) for rel, data in files.items()}}
        check.errors += [f"{check.id}: {line}" for line in errors]
        if check.errors:
            return check
        for task, entry in sorted(record["results"].items()):
            _check_task(check, task, entry, files)
        recompute_samples(check, record, files)
    except Refused as e:
        check.refused, check.record, check.hashes = True, None, {}
        check.recomputed, check.unverified, check.mismatched, check.notes = {}, {}, {}, []
        check.errors = [f"{folder.name if ID.fullmatch(folder.name) else repr(folder.name[:80])}: refused: {e}"]
    return check


def _finite(value: Any) -> bool:
    """A number a float holds, not infinite (``10**400`` is not one)."""
    try:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))
    except OverflowError:
        return False


def recompute_samples(check: Check, record: dict[str, Any], files: dict[str, bytes]) -> None:
    """Recompute the still unverified numbers of the tasks that carry lm-eval's samples
    (:mod:`unlearn_app.leaderboard.recompute`), from ``files``: the listed files, read safely, hashes checked."""
    from unlearn_app.leaderboard.recompute import SamplesError, parse_samples, recompute_run
    from unlearn_app.leaderboard.reference import samples_near_copy

    results = record["results"]

    def read(rel: Any) -> list[dict[str, Any]] | None:
        if not isinstance(rel, str) or rel not in files:
            return None
        return parse_samples(files[rel], rel)

    try:
        samples = {t: rows for t, e in results.items() if (rows := read(e.get("samples"))) is not None}
        reference = {t: rows for t, e in results.items() if (rows := read(e.get("reference_samples"))) is not None}
        if not samples:
            return
        _rederive_judged(check, results, samples, files)
        run = {"results": {t: {f"{m},none": e["aggregates"][m] for m in check.unverified.get(t, [])
                               if _finite(e["aggregates"][m])} for t, e in results.items()},
               "configs": {t: {"provenance": e.get("provenance") or {}} for t, e in results.items()}}
        again = recompute_run(run, samples, reference)
        copies = sorted(t for t, rows in reference.items() if t in samples and samples_near_copy(samples[t], rows))
        if copies:  # a near copy matters only where a metric is computed against the reference
            alone = recompute_run(run, {t: samples[t] for t in copies})
            copies = [t for t in copies if set(again[t].values) - set(alone[t].values)]
        if copies:
            check.errors.append(f"{check.id}: {', '.join(copies)}: the reference samples hold the run's own per-document "
                                "values (to a relative 1e-6): no distinct evaluation; submit with the retain model's")
            return
    except SamplesError as e:
        check.errors.append(f"{check.id}: {e}")
        return
    for task, metrics in sorted(check.unverified.items()):
        for metric in list(metrics):
            value = again[task].values.get(metric) if task in again else None
            if value is None:
                continue
            metrics.remove(metric)
            check.recomputed.setdefault(task, {})[metric] = value
            claimed = float(results[task]["aggregates"][metric])
            if not _agree(claimed, value):
                check.mismatched.setdefault(task, []).append(metric)
                check.errors.append(f"{check.id}: {task}/{metric} = {claimed:.6g} submitted, but {value:.6g} "
                                    "recomputed from its lm-eval samples")
        if not metrics:
            del check.unverified[task]


def _rederive_judged(check: Check, results: dict[str, Any], samples: dict[str, list[dict[str, Any]]],
                     files: dict[str, bytes]) -> None:
    """Replace each judge task's samples by their re-derived records (:mod:`.judged`), against the judged task's
    generations the submission carries (its lm-eval samples, or an open-unlearning run's per-item file): a stored
    record or answer that differs is a problem; a judge task that cannot be re-derived is left unverified (taken out
    of ``samples``)."""
    from unlearn_app.judge.results import is_judge_task
    from unlearn_app.leaderboard import judged

    for task in sorted(t for t in samples if is_judge_task(t)):
        source = judged.source_task(task)
        entry = results.get(source) or {}
        generated = None
        if source in samples:
            generated = judged.generations_of_samples(samples[source],
                                                      judged.benchmark_of(results[task].get("provenance")))
        elif entry.get("kind") == "open-unlearning" and entry.get("items") in files:
            try:
                generated = judged.generations_of_ou(untrusted.parse_json(files[entry["items"]], entry["items"]))
            except untrusted.Unreadable as e:
                raise Refused(str(e)) from None
        again = judged.rederive(task, samples[task], results[task].get("provenance"), generated)
        check.errors += [f"{check.id}: {task}: {line}" for line in again.problems]
        if again.rows is None:
            del samples[task]
            check.notes.append(f"{task}: the judge's numbers are unverified: {again.unverifiable}")
        else:
            samples[task] = again.rows


def submission_folders(root: str | Path) -> list[Path]:
    """The submission folders of a leaderboard folder (``root/submissions/*/``), or ``root`` if it is one. Symbolic
    links are listed too, so that validation refuses them by name."""
    root = Path(root)
    if (root / SUBMISSION_FILE).is_file():
        return [root]
    base = root / "submissions" if (root / "submissions").is_dir() else root
    return sorted(p for p in base.iterdir() if p.is_symlink() or (
        p.is_dir() and not p.name.endswith(".partial") and not p.name.startswith(".") and (p / SUBMISSION_FILE).exists()))


def unique(checks: list[Check]) -> list[Check]:
    """``checks`` with one per id: when several folders carry one id, the one that validates without a problem is
    kept if it is the only one; otherwise every one of them is refused (none can be told to be the genuine one)."""
    by_id: dict[str, list[Check]] = {}
    for c in checks:
        by_id.setdefault(c.id, []).append(c)
    out = []
    for same in by_id.values():
        good = [c for c in same if c.ok]
        if len(same) == 1 or len(good) == 1:
            out.append(same[0] if len(same) == 1 else good[0])
            continue
        for c in same:
            out.append(Check(c.id, c.folder, [f"{c.id}: refused: {len(same)} folders carry this id"], refused=True))
    return out
