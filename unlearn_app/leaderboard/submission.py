"""The submission format: one unlearned model's results, with the per-item values every aggregate is recomputed from.

A submission is a folder ``<id>/`` holding ``submission.json`` (see ``submission.schema.json`` beside this module,
:data:`SCHEMA_VERSION`) and, per TOFU / MUSE task, the per-item values as an open-unlearning ``<BENCH>_EVAL.json``
(``items/<task>/``; written from our samples files by :mod:`unlearn_app.open_unlearning.writer`, or copied from an
open-unlearning folder) and the reference (retain) run's (``reference/<task>/``; the record names the reference by
its folder name, the digest of these files and its model, see :mod:`.reference`). Every task of an lm-eval run
carries lm-eval's samples file as it was written (``samples/<task>.jsonl``; the reference run's as
``reference/<task>/samples.jsonl``), which :mod:`unlearn_app.leaderboard.recompute` recomputes every aggregate
from, and the versions that produced it (``produced_by``: lm-eval's, transformers', ours); an ``unlearn depth``
task carries its per-question, per-layer scores instead (``depth/<task>.json``, :mod:`.depth`). Its id ends with
the first 12 hex digits of a digest of its content (model, method, results, reference, file hashes; not the date or
the submitter's text), so the same results submitted twice get the same id.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from harness_ext.results import json_safe, latest_results_file, partial_tasks, read_results_file

SCHEMA_VERSION = 1
SCHEMA_FILE = Path(__file__).with_name("submission.schema.json")
SUBMISSION_FILE = "submission.json"
#: Fields that make a submission what it is (the digest in its id); the rest (date, submitter, packages) do not.
DIGESTED = ("model", "method", "results", "reference", "files")
#: Distributions whose versions a submission records.
PACKAGES = ("lm-eval-unlearning", "lm_eval", "transformers", "torch", "peft", "vllm")


class SubmissionError(ValueError):
    """Runs that cannot make a submission; the message says what to pass."""


@dataclass
class Built:
    """A submission ready to write: its record, the files to place beside it (relative path -> bytes) and what the
    submitter should know (one line each: e.g. tasks without samples, whose numbers stay unverified)."""

    record: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.record["id"]


def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text())


def schema_errors(record: Any) -> list[str]:
    """One line per way ``record`` breaks the schema (``path: message``); empty when it follows it."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    return [f"{'/'.join(str(p) for p in e.absolute_path) or '(top)'}: {e.message}"
            for e in sorted(validator.iter_errors(record), key=lambda e: list(map(str, e.absolute_path)))]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(record: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of the record's :data:`DIGESTED` fields."""
    content = {k: record.get(k) for k in DIGESTED}
    return sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode())


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-._") or "x"


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def without_local_paths(value: Any) -> Any:
    """``value`` with every string that is an absolute local path (``/...``, ``~...``, ``C:\\...``) replaced by its
    last part, recursively: a shared submission names no folder of the submitter's machine (hashes identify the
    files)."""
    if isinstance(value, dict):
        return {k: without_local_paths(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_local_paths(v) for v in value]
    if isinstance(value, str) and "\n" not in value and re.match(r"(/|~|[A-Za-z]:[\\/])", value):
        return re.split(r"[\\/]", value.rstrip("/\\"))[-1] or value
    return value


def _dumps(data: Any) -> bytes:
    return (json.dumps(json_safe(data), indent=2, sort_keys=True) + "\n").encode()


def _number(x: Any) -> float | None:
    import math

    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


# --------------------------------------------------------------------------- reading runs
@dataclass
class TaskResult:
    task: str
    run: str
    kind: str
    benchmark: str | None
    aggregates: dict[str, float]
    items: dict[str, Any] | None  # the <BENCH>_EVAL.json content
    version: Any = None
    provenance: dict[str, Any] | None = None
    samples: bytes | None = None  # lm-eval's samples file of the task (--log_samples)
    produced_by: dict[str, Any] | None = None
    group: bool = False  # an lm-eval group's row (recomputed from its tasks; no samples of its own)
    depth: bytes | None = None  # `unlearn depth`'s per-question, per-layer scores (leaderboard.depth.carried)
    limit: int | float | None = None  # lm_eval --limit, as its results file records it
    documents: dict[str, int] | None = None  # lm-eval's n-samples of the task: original and effective documents
    partial: str | None = None  # how much of the task was evaluated, when not all (harness_ext.results.partial_tasks)


def produced_by(raw: dict[str, Any], provenance: dict[str, Any] | None) -> dict[str, Any]:
    """The versions an lm-eval results file says produced it: lm-eval's (version, git hash), transformers' and,
    from the task's provenance, this package's (version, git commit)."""
    prov = provenance or {}
    return {"lm_eval": raw.get("lm_eval_version"), "lm_eval_git_hash": raw.get("upper_git_hash"),
            "git_hash": raw.get("git_hash"), "transformers": raw.get("transformers_version"),
            "package": prov.get("package"), "package_version": prov.get("version"), "git_commit": prov.get("git_commit")}


def _lm_eval_tasks(path: Path, run: str) -> list[TaskResult]:
    from harness_ext.results import samples_files
    from unlearn_app.leaderboard import depth
    from unlearn_app.open_unlearning.writer import ExportError, benchmark_of, export_task

    file = latest_results_file(path)
    raw = read_results_file(file)
    groups = raw.get("group_subtasks") or {}
    partial = partial_tasks(raw)
    limit = (raw.get("config") or {}).get("limit") if isinstance(raw.get("config"), dict) else None
    counts = raw.get("n-samples") if isinstance(raw.get("n-samples"), dict) else {}
    out = []
    for task, values in (raw.get("results") or {}).items():
        aggregates = {k.split(",")[0]: v for k, v in values.items()
                      if k.endswith(",none") and "_stderr" not in k and _number(v) is not None}
        if not aggregates:
            continue
        bench = benchmark_of(task)
        items = None
        uds = depth.carried(raw, task) if depth.is_depth(raw, task) else None
        if bench and uds is None:
            try:
                _, logs, _ = export_task(raw, task, file)
                items = logs if any("value_by_index" in e or "forget" in e for e in logs.values()) else None
            except ExportError:
                items = None
        config = (raw.get("configs") or {}).get(task) or {}
        provenance = config.get("provenance") if isinstance(config.get("provenance"), dict) else None
        found = samples_files(file, task)
        out.append(TaskResult(task, run, "lm-eval", bench, aggregates, items, (raw.get("versions") or {}).get(task),
                              provenance, found[0].read_bytes() if found else None, produced_by(raw, provenance),
                              task in groups and task not in (raw.get("configs") or {}),
                              uds, limit if _number(limit) is not None else None, _documents(counts.get(task)),
                              partial.get(task)))
    if not out:
        raise SubmissionError(f"{file} holds no task with numeric results")
    return out


def _documents(counts: Any) -> dict[str, int] | None:
    """lm-eval's ``n-samples`` of one task (``original`` and ``effective`` document counts), or None."""
    if not isinstance(counts, dict):
        return None
    pair = {k: counts.get(k) for k in ("original", "effective")}
    return pair if all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in pair.values()) else None


def _ou_tasks(path: Path, run: str) -> list[TaskResult]:
    from unlearn_app.open_unlearning.reader import MUSE_NAMES, TOFU_NAMES, ou_files, read_json, task_name

    out = []
    for bench, (eval_file, summary_file) in ou_files(path).items():
        logs = read_json(eval_file) if eval_file else {}
        summary = read_json(summary_file) if summary_file else {}
        names = TOFU_NAMES if bench == "TOFU" else MUSE_NAMES
        aggregates = {}
        for key, (ours, _) in names.items():
            claimed = summary.get(key, (logs.get(key) or {}).get("agg_value") if isinstance(logs.get(key), dict) else None)
            if _number(claimed) is not None:
                aggregates[ours] = float(claimed)
        folder = path if path.is_dir() else path.parent
        out.append(TaskResult(task_name(bench, logs, folder), run, "open-unlearning", bench, aggregates, logs or None))
    return out


def read_run(path: str | Path) -> tuple[list[TaskResult], dict[str, Any] | None, Path | None]:
    """The tasks of one RUN (an lm-eval output folder or results file, an open-unlearning folder, or an
    ``unlearn run`` checkpoint folder with its ``eval/``), the run config when it is an ``unlearn run`` folder, and
    the model folder it names (the checkpoint itself)."""
    import yaml

    from unlearn_app.open_unlearning.reader import is_ou_folder
    from unlearn_methods.checkpoint_folder import CONFIG_FILE

    path = Path(path)
    if not path.exists():
        raise SubmissionError(f"{path} does not exist; pass an lm-eval output folder, an open-unlearning folder or "
                              "an `unlearn run` checkpoint folder")
    if is_ou_folder(path):
        return _ou_tasks(path, path.name), None, None
    if path.is_dir() and (path / CONFIG_FILE).is_file():
        config = yaml.safe_load((path / CONFIG_FILE).read_text()) or {}
        if not (path / "eval").is_dir():  # its evaluation is another RUN (an lm_eval --output_path folder)
            return [], config, path
        return _lm_eval_tasks(path / "eval", path.name), config, path
    return _lm_eval_tasks(path, path.name), None, None


def _reference_samples(path: Path, task: TaskResult) -> bytes | None:
    """The reference run's samples file of the same task (DUSK's PrivLeak is recomputed against it), or None."""
    return next((t.samples for t in read_run(path)[0] if t.task == task.task and t.samples), None)


def _reference_items(path: Path, task: TaskResult) -> dict[str, Any] | None:
    """The reference run's per-item values (an open-unlearning ``<BENCH>_EVAL.json``) for ``task``: its task of the
    same name, else its only task of the same benchmark."""
    candidates = [t for t in read_run(path)[0] if t.benchmark == task.benchmark and t.items]
    match = [t for t in candidates if t.task == task.task] or (candidates if len(candidates) == 1 else [])
    return match[0].items if match else None


# --------------------------------------------------------------------------- building
#: The metrics a run has only against a reference (retain) run.
AGAINST_REFERENCE = ("forget_quality", "privleak")


def against_reference(task: str, t: TaskResult, reference_items: dict[str, Any]) -> dict[str, float]:
    """The :data:`AGAINST_REFERENCE` metrics ``t`` lacks (its run was evaluated without a reference), computed
    from its per-item values and the reference's with the functions validation recomputes them with."""
    import math

    from unlearn_app.leaderboard.items import recompute
    from unlearn_app.open_unlearning.reader import OuFolderError

    wanted = [m for m in AGAINST_REFERENCE if m not in t.aggregates]
    if not wanted or not t.benchmark:
        return {}
    try:
        values = recompute(t.benchmark, task, t.items | dict.fromkeys(wanted, {}), reference_items)
    except OuFolderError:  # validation says what is wrong with the per-item values
        return {}
    return {m: float(values[m]) for m in wanted if m in values and math.isfinite(values[m])}


def build(runs: list[str | Path], *, reference: str | Path | None = None, model_id: str | None = None,
          revision: str | None = None, model_dir: str | Path | None = None, family: str | None = None,
          method: str | None = None, hyperparameters: dict[str, Any] | None = None, submitter: str = "",
          notes: str = "", date: str | None = None) -> Built:
    """The submission of ``runs`` (see :func:`read_run`); the model is ``model_id`` at ``revision``, or the content
    hash of ``model_dir`` (by default the ``unlearn run`` folder among the runs)."""
    from harness_ext.provenance import path_fingerprint
    from unlearn_app.leaderboard.reference import files_digest, model_of, near_copy

    tasks: dict[str, TaskResult] = {}
    config: dict[str, Any] | None = None
    for path in runs:
        found, cfg, folder = read_run(path)
        if cfg is not None:
            if config is not None:
                raise SubmissionError("one submission is one model: pass one `unlearn run` folder (and lm-eval runs of it)")
            config, model_dir = cfg, model_dir or folder
        for t in found:
            if t.task in tasks:
                raise SubmissionError(f"{t.task} is in two of the runs ({tasks[t.task].run}, {t.run}); pass one of them")
            tasks[t.task] = t
    if not tasks:
        raise SubmissionError("no results among the RUNs: an `unlearn run` folder without eval/ needs the lm_eval "
                              "--output_path folder of its evaluation as another RUN")
    if (model_id is None) != (revision is None):
        raise SubmissionError("--model-id needs --revision (the 40-hex Hub commit sha), and --revision needs --model-id")
    if revision is not None and not re.fullmatch(r"[0-9a-f]{40}", revision):
        raise SubmissionError(f"--revision {revision!r} is not a 40-hex commit sha; `hf models info` or the Hub page "
                              "of the model shows it")
    if model_id is None and model_dir is None:
        raise SubmissionError("name the model: --model-id OWNER/NAME --revision SHA (a Hub model) or --model-dir DIR "
                              "(a local folder, hashed), or pass its `unlearn run` folder as a RUN")
    config = config or {}
    method_name = method or config.get("method")
    if not method_name:
        raise SubmissionError("name the method with --method (it is read from the run's config only for `unlearn run` folders)")
    params = dict(config.get("method_params") or {}) | dict(hyperparameters or {})
    name = model_id.split("/")[-1] if model_id else Path(model_dir).resolve().name
    if reference is not None:
        cut = sorted(f"{t.task} ({t.partial})" for t in read_run(reference)[0] if t.partial and t.task in tasks)
        if cut:
            raise SubmissionError(f"--reference {reference} is a partial evaluation: {', '.join(cut)}; Forget Quality "
                                  "and PrivLeak need the whole retain run: rerun lm_eval on it without --limit")
    files: dict[str, bytes] = {}
    results: dict[str, Any] = {}
    computed: list[str] = []  # tasks whose reference metrics are computed here, against --reference
    for task, t in sorted(tasks.items()):
        entry: dict[str, Any] = {"run": t.run, "kind": t.kind, "benchmark": t.benchmark, "version": t.version,
                                 "aggregates": t.aggregates, "items": None, "reference": None,
                                 "provenance": t.provenance}
        if t.kind == "lm-eval":
            entry |= {"samples": None, "reference_samples": None, "produced_by": t.produced_by,
                      "limit": t.limit, "documents": t.documents}
        if t.samples is not None:
            entry["samples"] = f"samples/{task}.jsonl"
            files[entry["samples"]] = t.samples
            ref_samples = _reference_samples(Path(reference), t) if reference is not None else None
            if ref_samples is not None:
                entry["reference_samples"] = f"reference/{task}/samples.jsonl"
                files[entry["reference_samples"]] = ref_samples
        if t.depth is not None:
            entry["depth"] = f"depth/{task}.json"
            files[entry["depth"]] = t.depth
        if t.items:
            items = t.items
            entry["items"] = f"items/{task}/{t.benchmark}_EVAL.json"
            ref_items = _reference_items(Path(reference), t) if reference is not None else None
            if ref_items:
                shared = near_copy(t.benchmark, t.items, ref_items)
                if shared:
                    raise SubmissionError(f"--reference {reference} holds {shared} of {task} itself: it is no "
                                          "distinct evaluation; pass the retain model's evaluation")
                entry["reference"] = f"reference/{task}/{t.benchmark}_EVAL.json"
                files[entry["reference"]] = _dumps(ref_items)
                added = against_reference(task, t, ref_items)
                if added:  # stored as open-unlearning stores them (agg_value), recomputed on validation
                    entry["aggregates"] = t.aggregates | added
                    items = items | {m: {"agg_value": v} for m, v in added.items()}
                    computed.append(f"{task} ({', '.join(sorted(added))})")
            files[entry["items"]] = _dumps(items)
        results[task] = entry
    ref_record = None
    if reference is not None:  # by name, content hash and model: no local path goes into a shared submission
        held = {rel: sha256(files[rel]) for e in results.values() if (rel := e["reference"])}
        ref_record = {"source": Path(reference).resolve().name, "sha256": files_digest(held), **model_of(reference)}
    record: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION, "id": "",
        "model": {"name": name, "family": family or str(config.get("model") or name),
                  "hub_id": model_id, "revision": revision,
                  "local_sha256": path_fingerprint(model_dir, skip=("eval", "checkpoints")) if model_dir else None},
        "method": {"name": str(method_name), "hyperparameters": params, "config": config or None},
        "results": results, "reference": ref_record, "packages": package_versions(),
        "date": date or datetime.now(UTC).replace(microsecond=0).isoformat(),
        "submitter": {"name": submitter, "notes": notes},
        "files": {p: sha256(b) for p, b in sorted(files.items())},
    }
    record = json_safe(record)
    for key in ("model", "method", "results"):  # the submitter's text is theirs to write
        record[key] = without_local_paths(record[key])
    record["id"] = f"{slug(name)}-{slug(str(method_name))}-{digest(record)[:12]}"
    bare = sorted(t.task for t in tasks.values()
                  if t.kind == "lm-eval" and t.samples is None and t.depth is None and not t.group)
    notes = [f"no samples file for {', '.join(bare)}: rerun lm_eval with --log_samples to have their numbers "
             "recomputed (without it they are shown unverified)"] if bare else []
    if computed:
        notes.append(f"computed against --reference {Path(reference).name} (the run was evaluated without one): "
                     f"{', '.join(computed)}")
    return Built(record, files, notes)


def write(built: Built, root: str | Path) -> Path:
    """Write the submission as ``root/<id>/`` (a fresh folder; :class:`SubmissionError` if it exists)."""
    folder = Path(root) / built.id
    if folder.exists():
        raise SubmissionError(f"{folder} exists: this submission is already there (a duplicate is refused)")
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    for rel, data in built.files.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_bytes(data)
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / SUBMISSION_FILE).write_bytes(_dumps(built.record))
    tmp.rename(folder)
    return folder
