"""``unlearn ci``: evaluate a checkpoint on a suite (or read existing results), check it, write the reports.

Outputs in ``--out DIR``: ``results.json`` (metrics, checks, provenance), ``summary.md`` (also appended to
``$GITHUB_STEP_SUMMARY``), ``junit.xml`` (one test case per check) and lm-eval's own results file under
``DIR/lm_eval/``. Exit status: 0 all checks pass, 1 a check fails, 2 an error.

Under a launcher (``accelerate launch -m unlearn_app ci ...``) every process scores its share of lm-eval's
requests and the main process gathers them, checks the results and writes every output; the other processes write
nothing and exit 0 once their share is scored (:func:`harness_ext.evaluate.is_main_process`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness_ext import provenance
from harness_ext.evaluate import is_main_process
from harness_ext.results import json_safe, latest_results_file, partial_tasks, read_results_file, task_metrics
from unlearn_app.checkpoint.adapter import Adapter, AdapterError, find_adapter
from unlearn_app.ci.cache import ResultsCache, cache_key, model_revision
from unlearn_app.ci.checks import MissingValue, Outcome, evaluate, lookup_in
from unlearn_app.ci.junit import write_junit
from unlearn_app.ci.suite import Suite, SuiteError, load_suite, validate_checks
from unlearn_app.ci.summary import markdown_summary, model_args_text
from unlearn_app.output_guard import write_text

log = logging.getLogger(__name__)

#: Model/task arguments that name where something is; their content is hashed separately for the cache key.
_LOCATION_KEYS = ("pretrained", "peft", "lora_local_path", "data_dir", "reference", "config_source")


class CiError(RuntimeError):
    """The evaluation could not be done (exit status 2); the message says what to fix."""


@dataclass
class CiOptions:
    suite: str
    out: str
    model: str | None = None
    revision: str | None = None
    from_results: str | None = None
    no_cache: bool = False
    cache_dir: str | None = None
    update_card: bool = False
    limit: int | None = None
    model_args: dict[str, Any] = field(default_factory=dict)
    sweep: dict[str, Any] | None = None  # the `unlearn sweep` trial gated (``--from-sweep``)


@dataclass
class ModelSpec:
    """What lm-eval loads: ``model_args`` (pretrained, peft, revision) and the pinned revision for the cache."""

    name: str
    model_args: dict[str, Any]
    revision: str | None
    adapter: Adapter | None = None

    def for_backend(self, backend: str) -> dict[str, Any]:
        """``model_args`` as the backend names them (an adapter: see :meth:`Adapter.model_args`)."""
        return self.adapter.model_args(backend) if self.adapter else dict(self.model_args)


def resolve_model(model: str, revision: str | None) -> ModelSpec:
    """A full model (Hub id or folder) or a LoRA adapter folder (its base model is read from adapter_config.json)."""
    path = Path(model).expanduser()
    try:
        adapter = find_adapter(path)
    except AdapterError as e:
        raise CiError(str(e)) from None
    if adapter:
        base_rev = model_revision(adapter.base)
        own = model_revision(str(path))
        pinned = f"{own}+base={base_rev}" if base_rev else None
        return ModelSpec(model, adapter.model_args("hf"), pinned, adapter)
    if not path.exists() and ("/" not in model or model.startswith((".", "/"))):
        raise CiError(f"--model {model}: no such folder, and not a Hub id (owner/name)")
    args: dict[str, Any] = {"pretrained": str(path) if path.exists() else model}
    if revision and not path.exists():
        args["revision"] = revision
    return ModelSpec(model, args, model_revision(model, revision))


def build_tasks(suite: Suite, model_args: dict[str, Any]) -> tuple[list[Any], dict[str, Any], dict[str, list[str]]]:
    """The suite built once, as lm-eval will evaluate it: the objects of its entries (groups, tasks, a tag's tasks)
    to hand to lm-eval, its leaf tasks by name, and its groups' members."""
    from harness_ext.evaluate import model_arguments
    from harness_ext.task_index import task_manager

    extra = {k: v for k, v in model_args.items() if k != "pretrained"}
    metadata = {**model_arguments(model_args.get("pretrained", ""), suite.backend, extra), **suite.task_metadata()}
    manager = task_manager(suite.tasks, metadata)  # our tasks plus the lm-eval ones the suite names, indexed once
    unknown = [t for t in suite.tasks if t not in manager.all_tasks]
    if unknown:
        raise SuiteError(suite.path, f"unknown task(s) {unknown}; `lm-eval ls tasks` lists them",
                         suite.lines.get("tasks"), "tasks")
    objects: list[Any] = []
    tasks: dict[str, Any] = {}
    groups: dict[str, list[str]] = {}
    for name in suite.tasks:  # one entry at a time, as lm-eval's own loading does, to keep each entry's object
        loaded = manager.load([name])
        objects.extend([loaded["groups"][name]] if name in loaded.get("groups", {}) else loaded["tasks"].values())
        tasks.update(loaded["tasks"])
        groups.update(loaded.get("group_map") or {})
    return objects, tasks, groups


def task_metric_names(task: Any) -> list[str]:
    """The metrics an lm-eval task reports (``metric_names()`` of our tasks, else its aggregation keys)."""
    if hasattr(task, "metric_names"):
        return list(task.metric_names())
    return list(task.aggregation())


def _task_inputs(tasks: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for name, task in sorted(tasks.items()):
        prov = task.provenance() if hasattr(task, "provenance") else {}
        out[name] = {"version": getattr(task, "VERSION", None) or (task.config.metadata or {}).get("version"),
                     "data_fingerprint": prov.get("data_fingerprint"), "metric_modes": prov.get("metric_modes"),
                     "reference": (prov.get("reference") or {}).get("sha256")}
    return out


def _strip_locations(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in _LOCATION_KEYS}


def evaluate_model(opts: CiOptions, suite: Suite, out: Path) -> tuple[dict | None, dict]:
    """Run (or reuse from the cache) lm-eval on the suite's tasks; returns lm-eval's results dict and cache info
    (the results None on the other processes of a launch, which write nothing)."""
    from harness_ext.evaluate import run_lm_eval

    spec = resolve_model(opts.model or "", opts.revision)
    model_args = {**suite.model_args, **opts.model_args, **spec.for_backend(suite.backend)}
    objects, tasks, groups = build_tasks(suite, model_args)  # built once: lm-eval evaluates these objects
    validate_checks(suite, {n: task_metric_names(t) for n, t in tasks.items()}, groups)
    limit = opts.limit or suite.limit
    inputs = {"model": spec.revision, "backend": suite.backend, "model_args": _strip_locations(model_args),
              "metadata": _strip_locations(suite.task_metadata()), "limit": limit, "suite_tasks": suite.tasks,
              "tasks": _task_inputs(tasks), "software": provenance.software()}
    key = cache_key(inputs) if spec.revision else None
    cache = ResultsCache(opts.cache_dir)
    info = {"key": key, "hit": False, "dir": str(cache.root), "enabled": not opts.no_cache and key is not None,
            "model_revision": spec.revision}
    if key is None:
        log.warning("The revision of %s cannot be pinned (offline Hub id without --revision SHA): not caching", spec.name)
    lm_out = out / "lm_eval"
    main = is_main_process()
    if main:
        shutil.rmtree(lm_out, ignore_errors=True)
    cached = cache.get(key) if info["enabled"] else None
    if cached is not None:
        info["hit"] = True
        if not main:  # the main process reads the cached results and writes the outputs
            return None, info
        lm_out.mkdir(parents=True)
        stamp = time.strftime("%Y-%m-%dT%H-%M-%S")
        shutil.copyfile(cached, lm_out / f"results_{stamp}.json")
        print(f"unlearn ci: results from the cache ({cached.parent}); --no-cache re-evaluates", flush=True)
        return json.loads(cached.read_text()), info
    extra = {k: v for k, v in model_args.items() if k != "pretrained"}
    try:
        res = run_lm_eval(model_args["pretrained"], objects, lm_out, suite.task_metadata(), backend=suite.backend,
                          batch_size=suite.batch_size, limit=limit, extra_model_args=extra)
    except Exception as e:  # lm-eval and the backends raise many types; exit 2 with the cause
        raise CiError(f"lm-eval failed on {spec.name}: {type(e).__name__}: {e}") from e
    if not main:  # this process scored its share; lm-eval returned the results on the main process only
        return None, info
    if res is None:
        raise CiError("lm-eval returned no results on the main process (a launcher that numbers its processes "
                      "differently from accelerate's?)")
    file = latest_results_file(lm_out)
    if key is not None:
        cache.put(key, file, inputs)
    return json.loads(file.read_text()), info


def copy_results(path: str, lm_out: Path, reference: str | dict[str, str] | None) -> tuple[dict[str, Any], str]:
    """The existing results ``path`` (lm-eval output, or an open-unlearning evaluation folder read as a run with
    ``reference`` for its Forget Quality and PrivLeak), copied into ``lm_out`` as an lm-eval results file so that
    from unlearn_app.open_unlearning.reader import as_results, is_ou_folder, read_ou_folder
    `unlearn report OUT` reads this run; returns the results and the file (or folder) they were read from."""
    from unlearn_app.open_unlearning.reader import as_results, check_one_kind, is_ou_folder, read_ou_folder

    check_one_kind(path, "--from-results")
    if is_ou_folder(path):
        raw = json_safe(as_results(read_ou_folder(path, reference)))
        shutil.rmtree(lm_out, ignore_errors=True)
        lm_out.mkdir(parents=True)
        (lm_out / f"results_{time.strftime('%Y-%m-%dT%H-%M-%S')}.json").write_text(json.dumps(raw, indent=2))
        return raw, str(path)
    source = latest_results_file(path)
    raw = read_results_file(source)
    if not raw.get("results"):
        raise CiError(f"{source} holds no results (its 'results' object is empty or missing); pass the results of a "
                      "finished lm_eval run")
    shutil.rmtree(lm_out, ignore_errors=True)
    lm_out.mkdir(parents=True)
    shutil.copyfile(source, lm_out / source.name)
    return raw, str(source)


def value_problems(raw: dict[str, Any], source: str) -> tuple[dict[tuple[str, str], str], dict[tuple[str, str], str]]:
    """Which metric values of a results dict cannot be checked, and which were not recomputed, ``(task, metric) ->
    why``: only finite numbers are values (a NaN is left to :func:`~unlearn_app.ci.checks.evaluate`, "not
    computed"); an open-unlearning run's ``invalid`` and ``not_recomputed`` values (see
    :func:`unlearn_app.open_unlearning.as_results`) say why in their own words."""
    from unlearn_app.open_unlearning.reader import NOTES_KEY

    unusable: dict[tuple[str, str], str] = {}
    for task, entries in (raw.get("results") or {}).items():
        for key, value in (entries.items() if isinstance(entries, dict) else ()):
            if "," not in key or "_stderr," in key:
                continue
            metric = key.split(",", 1)[0]
            if isinstance(value, bool) or value is None:
                why = f"is stored as {json.dumps(value)}, not a number"
            elif isinstance(value, (int, float)):
                if math.isfinite(value) or math.isnan(value):
                    continue
                why = f"is {value} (infinite), not a finite number"
            elif isinstance(value, str):
                why = f"is stored as the string {value[:40]!r}, not a number"
            else:
                why = f"is stored as {'a list' if isinstance(value, list) else 'an object'}, not a number"
            unusable[task, metric] = f"{task}/{metric} {why} in {source}; fix or re-create that file"
    unverified: dict[tuple[str, str], str] = {}
    for task, config in (raw.get("configs") or {}).items():
        notes = config.get(NOTES_KEY) if isinstance(config, dict) else None
        if not isinstance(notes, dict):
            continue
        for metric, why in (notes.get("invalid") or {}).items():
            unusable[task, metric] = f"{task}/{metric} was not recomputed: {why}"
        for metric, why in (notes.get("not_recomputed") or {}).items():
            unverified[task, metric] = f"{task}/{metric}: open-unlearning's stored value, not recomputed ({why})"
    return unusable, unverified


def _with_unusable(metrics: dict[str, dict[str, float]], unusable: dict[tuple[str, str], str]) -> dict[str, dict[str, float]]:
    """``metrics`` with a NaN for every unusable value, so the checks naming one find it (and fail, saying why)."""
    out = {t: dict(m) for t, m in metrics.items()}
    for task, metric in unusable:
        out.setdefault(task, {}).setdefault(metric, float("nan"))
    return out


def load_baseline(path: str) -> dict[str, dict[str, float]]:
    """Metrics of a baseline run (see :func:`read_baseline`), a value that cannot be checked as NaN."""
    return read_baseline(path)[0]


def read_baseline(path: str) -> tuple[dict[str, dict[str, float]], dict[tuple[str, str], str]]:
    """Metrics of a baseline run (an ``unlearn ci`` folder/results.json, an lm-eval output folder/file or an
    open-unlearning folder) and its values that cannot be checked (see :func:`value_problems`)."""
    p = Path(path).expanduser()
    ci_file = p / "results.json" if p.is_dir() else p
    if ci_file.is_file() and not ci_file.name.startswith("results_"):
        data = read_results_file(ci_file)
        if isinstance(data.get("results"), dict) and "checks" in data:
            return {t: {m: (float("nan") if v is None else v) for m, v in ms.items()}
                    for t, ms in data["results"].items()}, {}
    if not p.exists():
        raise CiError(f"baseline {path} does not exist (an lm-eval --output_path folder or an `unlearn ci --out` folder)")
    from unlearn_app.open_unlearning.reader import as_results, check_one_kind, is_ou_folder, read_ou_folder

    check_one_kind(p, "the baseline")
    if is_ou_folder(p):
        raw, source = json_safe(as_results(read_ou_folder(p))), str(p)
    else:
        file = latest_results_file(p)
        raw, source = read_results_file(file), str(file)
    unusable, _ = value_problems(raw, source)
    return _with_unusable(task_metrics(raw), unusable), unusable


def check_all(suite: Suite, metrics: dict[str, dict[str, float]], baseline: dict | None,
              unusable: dict[tuple[str, str], str] | None = None,
              unverified: dict[tuple[str, str], str] | None = None,
              baseline_unusable: dict[tuple[str, str], str] | None = None) -> list[Outcome]:
    """Every check of the suite; a value in ``unusable`` fails its check with the reason, and a check that read a
    value in ``unverified`` says so in its message."""
    current = lookup_in(metrics, "the results", unusable)
    base = lookup_in(baseline, f"the baseline {suite.baseline}", baseline_unusable) if baseline is not None else None
    outcomes = []
    for check in suite.checks:
        try:
            outcome = evaluate(check, current, base)
        except MissingValue as e:
            raise CiError(f"check {check.text!r}: {e}") from None
        marked = [f"{r.task}/{r.metric}" for r in check.refs if (r.task, r.metric) in (unverified or {})]
        if marked and outcome.message:
            outcome.not_recomputed = marked
            outcome.message += " (" + "; ".join(unverified[tuple(m.split("/", 1))] for m in marked) + ")"
        outcomes.append(outcome)
    return outcomes


def write_outputs(out: Path, record: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "results.json", json.dumps(json_safe(record), indent=2))
    text = markdown_summary(record)
    write_text(out / "summary.md", text)
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        with open(step, "a", encoding="utf-8") as f:
            f.write(text + "\n")
    write_junit(out / "junit.xml", record.get("checks") or [], error=record.get("error"))


#: What ``results.json`` says while a launched run is under way (replaced by the final record): a launch stopped by
#: another process's failure, or killed, is read as an error.
STOPPED = ("unlearn ci stopped before it finished (a process of the launch failed or was stopped; the launcher's "
           "output says why)")


def record_error(out: Path, record: dict[str, Any], message: str) -> str:
    """Write ``record`` with ``error: message`` as the run's outputs (``results.json``, ``summary.md``,
    ``junit.xml``), so that an error is never read as a failed check (where --out cannot be written, the printed
    line and exit 2 remain). Returns ``message``."""
    record["error"] = message
    try:
        write_outputs(out, record)
    except OSError:
        pass
    return message


def launched() -> bool:
    """Whether this run is one process of several (``accelerate launch``, ``torchrun``)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1) > 1


def run_ci(opts: CiOptions) -> int:
    """The whole command; returns the exit status (0 pass, 1 a check failed, 2 error). Under a launcher the other
    processes only score their share of the requests (:func:`share_of_evaluation`)."""
    if not is_main_process():
        return share_of_evaluation(opts)
    out = Path(opts.out)
    record: dict[str, Any] = {"suite": opts.suite, "model": {"name": opts.model or opts.from_results},
                              "provenance": {"software": provenance.software()}}
    if opts.sweep:
        record["sweep"] = opts.sweep
    try:
        suite = load_suite(opts.suite)
    except SuiteError as e:  # no run to record, but under a launcher (exit 1 for all) results.json alone tells
        from unlearn_app.commands import error

        message = _bounded(str(e))
        return error(record_error(out, record, message) if launched() else message)
    try:
        out.mkdir(parents=True, exist_ok=True)
        if launched():  # a launch stopped by another process's failure leaves an error, never a verdict
            write_text(out / "results.json", json.dumps(json_safe({**record, "error": STOPPED}), indent=2))
        if opts.from_results:
            raw, source = copy_results(opts.from_results, out / "lm_eval", suite.reference)
            record["from_results"] = str(opts.from_results)
            cache_info = {"hit": False, "enabled": False}
        elif opts.model:
            raw, cache_info = evaluate_model(opts, suite, out)
            source = str(out / "lm_eval")
        else:
            raise CiError("give --model HUB_ID_OR_DIR to evaluate, or --from-results DIR to check existing results")
        unusable, unverified = value_problems(raw, source)
        metrics = _with_unusable(task_metrics(raw), unusable)
        if opts.from_results:
            validate_checks(suite, {t: list(m) for t, m in metrics.items()}, what=f"{opts.from_results} holds")
        baseline, baseline_unusable = read_baseline(suite.baseline) if suite.baseline else (None, {})
        outcomes = check_all(suite, metrics, baseline, unusable, unverified, baseline_unusable)
        configs = raw.get("configs") or {}
        config = raw.get("config") or {}  # lm-eval's: the backend (`model`) and its `model_args`
        record.update({
            "model": {"name": opts.model or (config.get("model_args") and model_args_text(config["model_args"]))
                      or opts.from_results, "backend": suite.backend if opts.model else config.get("model"),
                      "revision": cache_info.get("model_revision")},
            "results": metrics,
            "baseline_results": baseline,
            "checks": [o.as_dict() for o in outcomes],
            "passed": all(o.passed for o in outcomes),
            "partial": partial_tasks(raw),  # tasks evaluated on part of their documents (lm_eval --limit)
        })
        record["provenance"].update({
            "tasks": {t: (configs.get(t) or {}).get("provenance") for t in metrics if t in configs},
            "reference": suite.reference, "baseline": suite.baseline, "cache": cache_info,
            "lm_eval_version": (raw.get("lm_eval_version") or raw.get("versions", {}).get("lm_eval")),
        })
        write_outputs(out, record)
        for task, how in record["partial"].items():
            print(f"unlearn ci: warning: {task} is a partial evaluation, {how}: its numbers are not the whole "
                  "task's")
        for o in outcomes:
            print(o.message)
        if opts.update_card:
            update_card(opts, raw)
        print(f"unlearn ci: {out / 'results.json'}, {out / 'summary.md'}, {out / 'junit.xml'}")
        return 0 if record["passed"] else 1
    except Exception as e:  # every error that is not a failed check exits 2, never 1
        known = isinstance(e, (SuiteError, CiError, FileNotFoundError, ValueError))
        message = _bounded(str(e) if known else f"internal error ({type(e).__name__}: {e}); please report it")
        from unlearn_app.commands import error

        return error(record_error(out, record, message))


def share_of_evaluation(opts: CiOptions) -> int:
    """A process other than the main one of a launch: read the suite, build its tasks and score this process's
    share of lm-eval's requests, writing nothing (the main process reports and writes). 0 when done; an error
    is printed (naming the process) and is exit 2, which stops the launch."""
    from unlearn_app.commands import error

    if opts.from_results or not opts.model:  # nothing to evaluate: the main process checks and writes
        return 0
    try:
        suite = load_suite(opts.suite)
    except SuiteError:  # the same error stops the main process, which reports it and records it in results.json
        return 0
    try:
        evaluate_model(opts, suite, Path(opts.out))
    except Exception as e:  # noqa: BLE001 - the main process waits for this one; say why it stopped
        rank = os.environ.get("RANK", "?")
        return error(_bounded(f"(process {rank}) {e}"))
    return 0


#: Longest error message printed or written (a value formatted into a message is cut there).
MAX_MESSAGE = 1000


def _bounded(message: str) -> str:
    return message if len(message) <= MAX_MESSAGE else f"{message[:MAX_MESSAGE]}... ({len(message) - MAX_MESSAGE} characters cut)"


def update_card(opts: CiOptions, raw: dict) -> None:
    from unlearn_app.checkpoint.model_card import update_card_eval_results

    target = opts.model
    if not target:
        raise CiError("--update-card needs --model (the folder or Hub repo whose card gets the results)")
    try:
        update_card_eval_results(target, raw, Path(target).name)
    except Exception as e:  # Hub errors (offline, no write access) of a Hub id
        raise CiError(f"could not update the model card of {target} ({type(e).__name__}: {e})") from e
    print(f"unlearn ci: model-index evaluation results written to the model card of {target}")
