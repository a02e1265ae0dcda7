"""The sweep spec (YAML) and its trials.

Example::

    model: runs/target                # or a list of models
    data: demo                        # any `unlearn run --data`
    data_dir: data/tofu
    forget: forget01                  # or a list of forget splits
    seeds: [0, 1]
    run: {epochs: 1, batch_size: 4, lora: true}       # shared `unlearn run` options
    methods:
      graddiff: {}                                    # the method's defaults
      npo:
        grid: {beta: [0.1, 0.5], lr: [1e-4, 1e-5]}    # method parameters and run options
      simnpo:
        random: {trials: 4, seed: 0, space: {beta: {low: 1, high: 10, log: true}, lr: [1e-4, 1e-5]}}
    evaluation:
      tasks: [tofu_forget01]
      limit: 20                       # documents per task (smoke runs)
      metadata: {data_dir: data/tofu}
      reference: runs/retain99        # gold run for Forget Quality / PrivLeak
      baseline: runs/target-eval      # results of the model before unlearning (for `baseline` in checks)
      checks: ["tofu_forget01/model_utility >= 0.9 * baseline"]
    select: tofu_forget01/forget_quality:max          # the setting kept per method (mean over seeds)
    select_if: ["tofu_forget01/model_utility >= 0.9 * baseline"]
    pareto: {utility: tofu_forget01/model_utility:max, forget: tofu_forget01/forget_quality:max}
    resources: {cpus: 1, gpus: 0, max_retries: 2}    # per trial (the Ray engine declares them; gpus: 2 runs 2 processes)
    attacks:                          # on each trial's checkpoint (full weights only), evaluated again
      quantize: {bits: 4}
      relearn: {steps: 20, lr: 1e-5, relearn_fraction: 0.5}   # `unlearn attack relearn` on the trial's forget split

Every error names the file, the key (and its line) and what to write; every trial's `unlearn run` configuration is
built and validated here, so a bad value stops the sweep before any trial starts. Trial ids are hashes of what the
trial runs, so the same spec always gives the same ids (and ``--resume`` finds them).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import random
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unlearn_app.ci.checks import Check, CheckSyntaxError, parse_check
from unlearn_app.selection import Selection, SelectionError, parse_select
from unlearn_tasks.settings import (
    Invalid,
    Settings,
    SettingsError,
    keys_help,
    parse_settings,
    read_section,
    read_settings,
)
from unlearn_tasks.settings import param as key


@dataclass
class SpecKeys:
    """The top-level keys of a sweep spec, declared once (type, default, help): the messages and the docs' table
    (``python -m unlearn_app.catalogue``) come from here; each mapping's own keys are declared below."""

    model: str | list[str] = key(None, "model folder or Hub id to unlearn from, or a list of them", required=True)
    data: str | None = key(None, "dataset, as `unlearn run --data` (tofu, demo, muse_news, ...)")
    data_dir: str | None = key(None, "local folder of the dataset")
    forget: str | list[str] | None = key(None, "forget split, or a list of them (default forget10)")
    retain: str | None = key(None, "retain split (default: the one matching each forget split)")
    seeds: list[int] | int = key([0], "list of seeds (each setting runs once per seed)")
    run: dict[str, Any] = key({}, "mapping of shared `unlearn run` options (epochs, lr, batch_size, lora, ...)")
    methods: dict[str, Any] = key({}, "mapping of method name to {} (its defaults), {grid: ...} or {random: ...}",
                                  required=True)
    evaluation: dict[str, Any] = key({}, "mapping: tasks, limit, metadata, reference, baseline, checks")
    select: str | None = key(None, "rule choosing each method's setting, TASK/METRIC:max or :min (mean over seeds)")
    select_if: list[str] = key([], "list of checks a setting's mean must pass to be selected")
    pareto: dict[str, str] = key({}, "mapping {utility: EXPR:max|min, forget: EXPR:max|min}: the axes of the "
                                 "trade-off picture")
    resources: dict[str, Any] = key({}, "mapping {cpus, gpus, processes, max_retries} per trial")
    stages: dict[str, Any] | None = key(None, "mapping {sequential: [forget splits]}: each setting unlearned on the "
                                        "splits one after another")
    klom: dict[str, Any] = key({}, "mapping {task, oracle: {model, ...}, ulira, split}: KLoM / U-LiRA of each "
                               "setting's seeds against oracle models (retain_ft from oracle.model, one per seed)")
    attacks: dict[str, Any] | None = key(None, "mapping {quantize: {bits, group_size}, relearn: {steps, lr, ...}}: "
                                         "attacks on every trial's checkpoint")
    early_stop: dict[str, Any] | None = key(None, "mapping {metric: TASK/METRIC, below: X, above: Y}: stop a trial "
                                            "(Ray Tune, --engine ray) when an evaluation during unlearning crosses a "
                                            "bound")


@dataclass
class Resources:
    """``resources:``, per trial (the Ray engine declares them)."""

    cpus: int = key(1, "CPU cores per trial (also its torch threads)", ge=1, le=1024)
    gpus: float = key(0, "GPUs per trial (a fraction shares a GPU; 2 or more: one process per GPU)", ge=0, le=64)
    processes: int | None = key(None, "processes per trial: more than 1 runs its `unlearn run` under `accelerate "
                                "launch`, each process a share of every step (default: gpus when 2 or more, else 1; "
                                "CPU processes with gpus: 0)", ge=1, le=64)
    max_retries: int = key(2, "times the Ray engine reruns a trial whose worker died", ge=0, le=100)


@dataclass
class MethodSearch:
    """A method's entry under ``methods:``: {} (its defaults), a grid or a random search."""

    grid: dict[str, Any] | None = key(None, "mapping of parameter to a list of values")
    random: dict[str, Any] | None = key(None, "mapping {trials: N, seed: S, space: {parameter: [values] or {low, "
                                        "high, log}}}")


@dataclass
class RandomSearch:
    """``methods.NAME.random:``."""

    trials: int = key(None, "number of settings to draw", ge=1, required=True)
    seed: int = key(0, "seed of the draws")
    space: dict[str, Any] = key({}, "mapping of parameter to [values] or {low, high, log}", required=True)


@dataclass
class Pareto:
    """``pareto:``: the axes of the trade-off picture."""

    utility: str = key(None, "EXPR:max|min", required=True)
    forget: str = key(None, "EXPR:max|min", required=True)


@dataclass
class EarlyStop:
    """``early_stop:``."""

    metric: str = key(None, "TASK/METRIC of the evaluation-during-unlearning rows", required=True)
    below: float | None = key(None, "stop when the metric is below this number")
    above: float | None = key(None, "stop when it is above this number")


@dataclass
class Quantize:
    """``attacks.quantize:``."""

    bits: int = key(None, "bits of the quantized weights", choices=(4, 8), required=True)
    group_size: int | None = key(None, "weights sharing one scale (default: one per row)", gt=0)


@dataclass
class Relearn:
    """``attacks.relearn:``: the options of `unlearn attack relearn`."""

    steps: int = key(20, "optimiser steps", ge=1)
    lr: float = key(1e-5, "learning rate", gt=0)
    batch_size: int = key(4, "batch size", ge=1)
    relearn_fraction: float | None = key(None, "share of the forget split shown (default 0.5)", gt=0, lt=1)
    relearn_data: str | None = key(None, "related corpus shown instead of forget items (a .jsonl/.json/.csv/"
                                   ".parquet file)")
    seed: int | None = key(None, "seed of the shown / held-out split and the training (default: the trial's seed)",
                           ge=0)


@dataclass
class Klom:
    """``klom:``."""

    task: str | None = key(None, "margins task scored on every checkpoint (default margins_tofu_<forget> for tofu / "
                           "demo data)")
    oracle: dict[str, Any] | None = key(None, "mapping: model (the oracles' starting point, before training on the "
                                        "dataset) and any `unlearn run` options of the oracle runs (method retain_ft)")
    ulira: bool = key(True, "also U-LiRA")
    split: str = key("forget", "split of the margins task shown in the leaderboard")


KEYS = keys_help(SpecKeys)
RESOURCE_KEYS = keys_help(Resources)
METHOD_KEYS = keys_help(MethodSearch)
EARLY_STOP_KEYS = keys_help(EarlyStop)
RELEARN_KEYS = keys_help(Relearn)
KLOM_KEYS = keys_help(Klom)

#: The most trials one spec may expand to (a larger grid or random search is refused before it is built).
MAX_TRIALS = 10_000
#: RunConfig fields a spec may not set in ``run`` (the sweep sets them per trial).
SWEEP_OWNED = {"method", "model", "out", "data", "data_dir", "forget", "retain", "seed", "method_params",
               "eval_tasks", "eval_limit", "eval_metadata", "push_to_hub", "resume", "overwrite", "progress"}


#: A sweep spec that cannot be used: ``FILE:LINE: key: what to fix`` (the error of every settings file).
SpecError = SettingsError


@dataclass(frozen=True)
class Trial:
    """One `unlearn run` + evaluation: ``id`` hashes everything it runs; ``setting`` the same without the seed."""

    id: str
    setting: str
    method: str
    model: str
    forget: str
    seed: int
    params: dict[str, Any]  # method parameters from the grid / random space
    run: dict[str, Any]  # `unlearn run` options (shared ones with the grid's over them)
    values: dict[str, Any] = field(default_factory=dict)  # what the grid / random search set (params and options)
    stage: int | None = None  # the place (1, 2, ...) in a sequential chain (``stages.sequential``)
    after: str | None = None  # the trial whose checkpoint this stage unlearns from (the previous stage)
    oracle: bool = False  # an oracle of the KLoM ensembles (retain-only training), not a leaderboard row

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class Evaluation:
    """``evaluation:``: what every trial's checkpoint is evaluated on."""

    tasks: list[str] = key([], "list of lm-eval tasks run on every trial's checkpoint", file_type=list[str] | str)
    limit: int | None = key(None, "documents per task (smoke runs)", gt=0)
    metadata: dict[str, Any] = key({}, "mapping of task options (lm_eval --metadata)")
    reference: str | dict[str, str] | None = key(None, "reference run folder, or {forget10: DIR, ...}")
    baseline: str | None = key(None, "results of the model before unlearning (lm-eval output folder or `unlearn ci` "
                               "folder)")
    checks: list[Check] = key([], "list of `unlearn ci` checks recorded for every trial", file_type=list[str])

    def task_metadata(self) -> dict[str, Any]:
        return {**self.metadata, **({"reference": self.reference} if self.reference is not None else {})}


EVAL_KEYS = keys_help(Evaluation)


@dataclass
class Spec:
    path: str
    text: str
    data: dict[str, Any]  # data, data_dir, retain: the dataset options shared by every trial
    trials: list[Trial]
    evaluation: Evaluation
    select: Selection | None = None
    pareto: dict[str, Selection] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=lambda: {"cpus": 1, "gpus": 0, "processes": 1, "max_retries": 2})
    attacks: dict[str, dict[str, Any]] = field(default_factory=dict)
    klom: dict[str, Any] = field(default_factory=dict)  # task, oracle_model, oracle_run, ulira, split
    #: ``{metric, below, above}``: Ray Tune stops a trial whose evaluation-during-unlearning row crosses a bound.
    early_stop: dict[str, Any] | None = None

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def trial_config(self, trial: Trial, out: str | Path) -> dict[str, Any]:
        """The `unlearn run` options of ``trial`` writing to ``out`` (for ``load_run_config``)."""
        ev = self.evaluation
        return {**trial.run, **self.data, "method": trial.method, "model": trial.model, "forget": trial.forget,
                "seed": trial.seed, "method_params": dict(trial.params), "out": str(out),
                "eval_tasks": list(ev.tasks) or None, "eval_limit": ev.limit, "eval_metadata": ev.task_metadata(),
                "progress": False, "overwrite": True}


def load_spec(path: str | Path) -> Spec:
    return _spec(read_settings(path, "sweep spec"))


def parse_spec(text: str | bytes, where: str = "<spec>") -> Spec:
    """Read, validate and expand a spec into its trials; :class:`SpecError` (``FILE:LINE: key: what to fix``)."""
    return _spec(parse_settings(text, where))


def _spec(doc: Settings) -> Spec:
    if not isinstance(doc.data, dict):
        raise SettingsError(doc.where, "expected a YAML mapping with at least 'model' and 'methods'")
    try:
        return _expand(doc)
    except Invalid as e:
        raise doc.located(e) from None


def _expand(doc: Settings) -> Spec:
    """The spec's trials; a value that cannot be used is :class:`Invalid` (its key and what to write)."""
    raw, where = doc.data, doc.where
    top = read_section(SpecKeys, raw)
    models = _strings(top.model, "model")
    forgets = _strings(top.forget or "forget10", "forget")
    sequence = _sequence(raw)
    seeds = [top.seeds] if isinstance(top.seeds, int) else list(top.seeds)
    if not seeds:
        raise Invalid("seeds", "give a list of integers, e.g. seeds: [0, 1, 2]")
    if len(set(seeds)) != len(seeds):
        raise Invalid("seeds", f"a seed is listed twice ({seeds})")
    shared = top.run
    from unlearn_methods.config import run_fields as all_run_fields

    run_fields = {f.name for f in all_run_fields()}
    for name in shared:
        if name in SWEEP_OWNED:
            raise Invalid(f"run.{name}", "is set by the sweep for each trial (use the spec's own key: model, data, "
                          "forget, seeds, methods, evaluation)")
        if name not in run_fields:
            raise Invalid(f"run.{name}", "unknown `unlearn run` option; known: "
                          f"{', '.join(sorted(run_fields - SWEEP_OWNED))}")
    data = {k: raw[k] for k in ("data", "data_dir", "retain") if raw.get(k) is not None}
    evaluation = _evaluation(top.evaluation)
    klom = _klom(read_section(Klom, top.klom, "klom"), raw, forgets, sequence, seeds, shared, run_fields) \
        if top.klom else {}
    if klom and klom["task"] not in evaluation.tasks:  # every trial (unlearned and oracle) scores the margins
        evaluation.tasks.append(klom["task"])
    methods = top.methods
    if not methods:
        raise Invalid("methods", "give a mapping of method names, e.g. methods: {graddiff: {}, npo: {grid: {beta: "
                      "[0.1, 0.5]}}}")
    _distinct_methods(doc, methods)
    for method in methods:  # every name before any method class (and torch) is imported
        _known_method(str(method))
    resources = _resources(read_section(Resources, top.resources, "resources"))

    settings = {method: _settings(str(method), read_section(MethodSearch, body, f"methods.{method}"), run_fields)
                for method, body in methods.items()}
    per_setting = len(models) * len(sequence or forgets) * len(seeds)
    _cap(sum(map(len, settings.values())) * per_setting, "methods",
         f"trials ({sum(map(len, settings.values()))} settings x {per_setting} models, forget splits and seeds)")
    trials: list[Trial] = []
    for method in methods:
        for values in settings[method]:
            params = {k: v for k, v in values.items() if k not in run_fields}
            run = {**shared, **{k: v for k, v in values.items() if k in run_fields}}
            if sequence:
                for model, seed in itertools.product(models, seeds):
                    for stage, forget in enumerate(sequence, 1):
                        after = trials[-1].id if stage > 1 else None
                        trials.append(_trial(str(method), model, forget, seed, params, run, data, evaluation, values,
                                             sequence=sequence, stage=stage, after=after,
                                             processes=resources["processes"]))
                continue
            for model, forget, seed in itertools.product(models, forgets, seeds):
                trials.append(_trial(str(method), model, forget, seed, params, run, data, evaluation, values,
                                     named=len(forgets) > 1, processes=resources["processes"]))
    if klom:  # the oracle ensemble: retain-only training from oracle.model, one model per seed (and split)
        oracle_run = {**shared, **klom["oracle_run"]}
        for forget, seed in itertools.product(forgets, seeds):
            trials.append(_trial("retain_ft", klom["oracle_model"], forget, seed, {}, oracle_run, data, evaluation,
                                 {}, named=len(forgets) > 1, oracle=True, processes=resources["processes"]))
    ids = [t.id for t in trials]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise Invalid("methods", f"two trials are the same run ({dup}); remove the repeated value")
    if sequence and shared.get("lora", True) and not shared.get("merge", False):
        raise Invalid("stages.sequential", "a stage unlearns the previous stage's checkpoint, which must be full "
                  "weights: add merge: true (or lora: false) under run:")
    attacks = _attacks(top.attacks, shared, evaluation)
    spec = Spec(where, doc.text, data, trials, evaluation, resources=resources, attacks=attacks, klom=klom)
    _check_configs(spec)
    spec.select = _rule(top.select, top.select_if, "select", evaluation)
    if top.pareto:
        pareto = read_section(Pareto, top.pareto, "pareto",
                              expected="give both utility: and forget:, each TASK/METRIC:max or :min")
        spec.pareto = {axis: _rule(getattr(pareto, axis), [], f"pareto.{axis}", evaluation)
                       for axis in ("utility", "forget")}
    if top.early_stop is not None:
        spec.early_stop = _early_stop(read_section(EarlyStop, top.early_stop, "early_stop"), trials, evaluation)
        if resources["processes"] > 1:
            raise Invalid("early_stop", "reports the evaluation rows of a trial running in one process; with "
                          f"resources.processes {resources['processes']} remove early_stop (or run one process per "
                          "trial)")
    return spec


def _resources(raw: Resources) -> dict[str, Any]:
    """``resources:`` with ``processes`` resolved: one process per GPU (``gpus`` whole when above 1), or CPU
    processes for trials without GPUs."""
    gpus, processes = raw.gpus, raw.processes
    if gpus > 1 and gpus != int(gpus):
        raise Invalid("resources.gpus", f"{gpus:g}: above 1, give a whole number of GPUs (one process each)")
    if processes is None:
        processes = int(gpus) if gpus >= 2 else 1
    elif gpus and processes != max(1, int(gpus)):
        raise Invalid("resources.processes", f"{processes} processes on {gpus:g} GPUs: a trial's processes take one "
                      f"GPU each; give processes: {max(1, math.ceil(gpus))} (or leave it out)")
    return {**dataclasses.asdict(raw), "processes": processes}


def _distinct_methods(doc: Settings, methods: dict[str, Any]) -> None:
    """Two entries naming one method (``ga`` and ``GA``, ``simnpo`` and ``sim-npo``) would run it twice under two
    names: refused, naming both lines."""
    seen: dict[str, str] = {}
    for method in methods:
        name = str(method).lower().replace("-", "_")
        if name in seen:
            raise Invalid(f"methods.{method}", f"the same method as {seen[name]} (lines "
                          f"{doc.line(f'methods.{seen[name]}')} and {doc.line(f'methods.{method}')}); keep one")
        seen[name] = str(method)


def _early_stop(raw: EarlyStop, trials: list[Trial], evaluation: Evaluation) -> dict[str, Any]:
    """``early_stop: {metric: TASK/METRIC, below: X, above: Y}``: checked here; every trial evaluates during
    unlearning (``run: {eval_every: N}``), and the metric's task is one the evaluation runs."""
    metric = raw.metric
    if metric.count("/") != 1 or not all(metric.split("/")):
        raise Invalid("early_stop.metric", f"expected TASK/METRIC, e.g. {(evaluation.tasks or ['tofu_forget10'])[0]}"
                      f"/model_utility, got {metric!r}")
    if metric.split("/")[0] not in evaluation.tasks:
        raise Invalid("early_stop.metric", f"names {metric.split('/')[0]}, which evaluation.tasks does not run "
                      f"({evaluation.tasks or 'none'})")
    if raw.below is None and raw.above is None:
        raise Invalid("early_stop", "give below: X and/or above: Y (the bounds that stop a trial)")
    if not all(t.run.get("eval_every") for t in trials):
        raise Invalid("early_stop", "acts on the evaluation during unlearning: add eval_every: N (steps) under run:")
    return {"metric": metric, "below": raw.below, "above": raw.above}


def _attacks(raw: dict[str, Any] | None, shared: dict[str, Any], evaluation: Evaluation) -> dict[str, dict[str, Any]]:
    """``attacks: {quantize: {bits, group_size}, relearn: {steps, lr, ...}}``: checked here; the checkpoint must be
    full weights."""
    if raw is None:
        return {}
    if not raw or set(raw) - {"quantize", "relearn"}:
        raise Invalid("attacks", "expected {quantize: {bits: 4 or 8, group_size: N}} and/or {relearn: {steps, lr, "
                      "batch_size, relearn_fraction, relearn_data, seed}}")
    if shared.get("lora", True) and not shared.get("merge", False):
        name = "quantize" if "quantize" in raw else "relearn"
        verb = "quantizes" if name == "quantize" else "fine-tunes"
        raise Invalid(f"attacks.{name}", f"{verb} full weights: add merge: true (or lora: false) under run:")
    attacks: dict[str, dict[str, Any]] = {}
    if "quantize" in raw:
        attacks["quantize"] = dataclasses.asdict(read_section(Quantize, raw["quantize"], "attacks.quantize"))
        if not evaluation.tasks:
            raise Invalid("attacks", "an attacked checkpoint is evaluated on evaluation.tasks: give them")
    if "relearn" in raw:
        relearn = read_section(Relearn, raw["relearn"], "attacks.relearn")
        if relearn.relearn_data is not None and not Path(relearn.relearn_data).is_file():
            raise Invalid("attacks.relearn.relearn_data", f"{relearn.relearn_data} is not a file (paths are read "
                          "from the folder unlearn sweep runs in)")
        attacks["relearn"] = dataclasses.asdict(relearn)
    return attacks


def _klom(raw: Klom, spec: dict[str, Any], forgets: list[str], sequence: list[str], seeds: list[int],
          shared: dict[str, Any], run_fields: set[str]) -> dict[str, Any]:
    """``klom:``: the margins task, the oracle runs' options; an ensemble is the seeds, so at least two."""
    if sequence:
        raise Invalid("klom", "KLoM ensembles are not combined with stages.sequential")
    if len(seeds) < 2:
        raise Invalid("klom", f"an ensemble is one model per seed: give at least two seeds (seeds: {seeds})")
    task = raw.task
    if task is None:
        if spec.get("data", "tofu") not in ("tofu", "demo") or len(forgets) > 1:
            raise Invalid("klom.task", "give the margins task (e.g. margins_tofu_forget10, or margins with "
                          "data_file in evaluation.metadata)")
        task = f"margins_tofu_{forgets[0]}"
    if not task.startswith("margins"):
        raise Invalid("klom.task", f"expected a margins task (margins, margins_tofu_forget10, ...), got {task!r}")
    oracle = raw.oracle
    if not isinstance(oracle, dict) or not isinstance(oracle.get("model"), str) or not oracle["model"]:
        raise Invalid("klom.oracle", "give {model: DIR, ...}: the model the oracles are trained from on the retain "
                      "split (the target's starting point), and any `unlearn run` options (epochs, lr, ...)")
    options = {k: v for k, v in oracle.items() if k != "model"}
    for name in options:
        if name in SWEEP_OWNED or name not in run_fields:
            raise Invalid(f"klom.oracle.{name}", "not an `unlearn run` option the oracle runs may set; known: "
                          f"{', '.join(sorted(run_fields - SWEEP_OWNED))}")
    if not raw.split:
        raise Invalid("klom.split", "expected a split name of the margins task (forget, retain, holdout)")
    return {"task": task, "oracle_model": oracle["model"], "oracle_run": options, "ulira": raw.ulira,
            "split": raw.split}


def _sequence(raw: dict[str, Any]) -> list[str]:
    """``stages: {sequential: [split, ...]}``: the forget splits unlearned one after another (MUSE-style)."""
    stages = raw.get("stages")
    if stages is None:
        return []
    if not isinstance(stages, dict) or set(stages) != {"sequential"}:
        raise Invalid("stages", "expected {sequential: [forget split, forget split, ...]}")
    splits = stages["sequential"]
    if not isinstance(splits, list) or len(splits) < 2 or not all(isinstance(v, str) and v for v in splits):
        raise Invalid("stages.sequential", "give a list of at least two forget splits, unlearned in that order")
    if "forget" in raw:
        raise Invalid("forget", "stages.sequential gives the forget splits of the stages; drop forget:")
    return list(splits)


def _strings(value: Any, key: str) -> list[str]:
    if isinstance(value, str) and value:
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return list(dict.fromkeys(value))
    raise Invalid(key, f"expected a string or a list of strings ({KEYS[key]})")


def _evaluation(raw: dict[str, Any]) -> Evaluation:
    evaluation = read_section(Evaluation, raw, "evaluation")
    tasks = evaluation.tasks
    if isinstance(tasks, str):
        evaluation.tasks = tasks = [t.strip() for t in tasks.split(",") if t.strip()]
    checks = []
    for i, text in enumerate(evaluation.checks):
        try:
            check = parse_check(text)
        except CheckSyntaxError as e:
            raise Invalid(f"evaluation.checks.{i}", f"bad check: {e}") from None
        _known_tasks(check.refs, tasks, f"check {check.text!r}", f"evaluation.checks.{i}")
        if evaluation.baseline is None and "baseline" in check.text:
            raise Invalid(f"evaluation.checks.{i}", f"{check.text!r} uses baseline; add evaluation.baseline: DIR")
        checks.append(check)
    if checks and not tasks:
        raise Invalid("evaluation.checks", "checks need evaluation.tasks")
    evaluation.checks = checks
    evaluation.metadata = dict(evaluation.metadata)
    return evaluation


def _known_tasks(found, tasks: list[str], what: str, key: str) -> None:
    unknown = [r.task for r in found if r.task not in tasks]
    if unknown:
        raise Invalid(key, f"{what} names {unknown[0]}, which evaluation.tasks does not run ({tasks or 'none'})")


def _rule(text: Any, conditions: Any, key: str, evaluation: Evaluation) -> Selection | None:
    if text is None:
        if conditions:
            raise Invalid("select_if", "needs select: TASK/METRIC:max|min")
        return None
    if not isinstance(conditions, list):
        raise Invalid("select_if", "give a list of checks")
    try:
        rule = parse_select(text, conditions)
    except SelectionError as e:
        raise Invalid(key, str(e).replace("--select-if", "select_if").replace("--select", key)) from None
    _known_tasks([r for c in [rule] for r in _refs(c)], evaluation.tasks, f"{text!r}", key)
    if evaluation.baseline is None and any("baseline" in c.text for c in rule.conditions):
        raise Invalid("select_if", "a check uses baseline; add evaluation.baseline: DIR")
    return rule


def _refs(rule: Selection):
    from unlearn_app.ci.checks import refs

    return refs(rule.expression) + [r for c in rule.conditions for r in c.refs]


# --------------------------------------------------------------------------- the settings of a method
def _known_method(method: str) -> str:
    """The registry key of ``method``, checked by name (no method class, no torch imported)."""
    from unlearn_methods.registry import is_method, method_key, method_names

    if not is_method(method):
        raise Invalid(f"methods.{method}", f"unknown method; available: {', '.join(method_names())}")
    return method_key(method)


def _declared(method: str) -> type:
    from unlearn_methods import all_methods

    key = _known_method(method)
    return all_methods()[key]


def _settings(method: str, body: MethodSearch, run_fields: set[str]) -> list[dict[str, Any]]:
    """The method's settings (parameter -> value as its declared type), in a fixed order: the grid's product or
    the random draws."""
    cls = _declared(method)
    settings = _raw_settings(method, body, cls.Params.types(), run_fields)
    from unlearn_methods.config import coerce, run_hints

    hints = run_hints()
    typed = []
    for values in settings:
        try:
            params = cls.Params.from_dict({k: v for k, v in values.items() if k not in run_fields}, method).to_dict()
            typed.append({k: params[k] if k in params else coerce(v, hints[k], k) for k, v in values.items()})
        except ValueError as e:
            raise Invalid(f"methods.{method}", str(e)) from None
    return typed


def _raw_settings(method: str, body: MethodSearch, types: dict[str, Any],
                  run_fields: set[str]) -> list[dict[str, Any]]:
    if body.grid is not None and body.random is not None:
        raise Invalid(f"methods.{method}", "give grid: or random:, not both")

    def known(name: str, key: str) -> None:
        if name not in types and (name not in run_fields or name in SWEEP_OWNED):
            raise Invalid(f"{key}.{name}", f"{method} has no parameter {name!r}; it takes "
                          f"{', '.join(types) or 'none'} (`unlearn methods`), or give an `unlearn run` option such as "
                          "lr")

    if body.grid is not None:
        grid = body.grid
        key = f"methods.{method}.grid"
        if not grid:
            raise Invalid(key, METHOD_KEYS["grid"])
        for name, values in grid.items():
            known(name, key)
            if not isinstance(values, list) or not values:
                raise Invalid(f"{key}.{name}", f"give a list of values, e.g. {name}: [0.1, 0.5]")
        names = list(grid)
        _cap(math.prod(len(grid[n]) for n in names), key)
        return [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]
    if body.random is not None:
        key = f"methods.{method}.random"
        rnd = read_section(RandomSearch, body.random, key)
        if not rnd.space:
            raise Invalid(f"{key}.space", "give a mapping of parameter to [values] or {low, high, log}")
        _cap(rnd.trials, f"{key}.trials")
        hints = dict(types)
        from unlearn_methods.config import run_hints

        hints.update({k: v for k, v in run_hints().items() if k not in hints})
        for name, dist in rnd.space.items():
            known(name, f"{key}.space")
            _check_distribution(dist, f"{key}.space.{name}", hints[name])
        rng = random.Random(f"{method}:{rnd.seed}")  # a string seed: the same draws on every platform
        return [{name: _draw(rng, dist, hints[name]) for name, dist in rnd.space.items()} for _ in range(rnd.trials)]
    return [{}]


def _cap(count: int, key: str, what: str = "settings") -> None:
    """Refuse more than :data:`MAX_TRIALS` settings or trials, before they are built."""
    if count > MAX_TRIALS:
        raise Invalid(key, f"{count} {what}; a sweep runs at most {MAX_TRIALS} trials: make the grid or the random "
                  "search smaller (or split it into several sweeps)")


def _is_int(tp: Any) -> bool:
    return int in (typing.get_args(tp) or (tp,)) and float not in (typing.get_args(tp) or (tp,))


def _check_distribution(dist: Any, key: str, tp: Any) -> None:
    if isinstance(dist, list) and dist:
        return
    if not isinstance(dist, dict) or set(dist) - {"low", "high", "log"} or not {"low", "high"} <= set(dist):
        raise Invalid(key, "give a list of values or {low: A, high: B, log: true|false}")
    low, high = dist["low"], dist["high"]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)) or not low < high:
        raise Invalid(key, f"low and high must be numbers with low < high, got {low!r} and {high!r}")
    if dist.get("log") and low <= 0:
        raise Invalid(key, f"log: true needs low > 0, got {low}")
    if _is_int(tp) and not (float(low).is_integer() and float(high).is_integer()):
        raise Invalid(key, "the parameter is an integer: give integer low and high")


def _draw(rng: random.Random, dist: Any, tp: Any) -> Any:
    if isinstance(dist, list):
        return dist[rng.randrange(len(dist))]
    low, high = float(dist["low"]), float(dist["high"])
    if _is_int(tp):
        if dist.get("log"):
            return int(round(math.exp(rng.uniform(math.log(low), math.log(high)))))
        return rng.randint(int(low), int(high))
    value = math.exp(rng.uniform(math.log(low), math.log(high))) if dist.get("log") else rng.uniform(low, high)
    return float(f"{value:.6g}")  # readable in ids, tables and configs


def _digest(content: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:10]


def _trial(method: str, model: str, forget: str, seed: int, params: dict[str, Any], run: dict[str, Any],
           data: dict[str, Any], evaluation: Evaluation, values: dict[str, Any], named: bool = False,
           sequence: list[str] | None = None, stage: int | None = None, after: str | None = None,
           oracle: bool = False, processes: int = 1) -> Trial:
    """Ids: ``METHOD-HASH``; with several forget splits ``METHOD-SPLIT-HASH``; a sequential stage
    ``METHOD-HASH-sK``, the hash shared by the stages of one chain (it covers the whole sequence). The hash covers
    the processes a trial runs in when more than one (each process takes a batch of every step, so the weights
    differ); a trial of one process hashes as before the count was recorded, so its earlier records still count."""
    setting = {"method": method, "model": model, "forget": forget, "params": params, "run": run, "data": data,
               "evaluation": {"tasks": evaluation.tasks, "limit": evaluation.limit,
                              "metadata": evaluation.task_metadata()}}
    if processes > 1:
        setting["processes"] = processes
    if sequence:
        chain = {**setting, "forget": None, "sequence": sequence}
        return Trial(f"{method}-{_digest({**chain, 'seed': seed})}-s{stage}", f"{method}-{_digest(chain)}-s{stage}",
                     method, model, forget, seed, dict(params), dict(run), dict(values), stage, after)
    prefix = "oracle" if oracle else method
    prefix = f"{prefix}-{forget}" if named else prefix
    return Trial(f"{prefix}-{_digest({**setting, 'seed': seed})}", f"{prefix}-{_digest(setting)}", method, model,
                 forget, seed, dict(params), dict(run), dict(values), oracle=oracle)


def _check_configs(spec: Spec) -> None:
    """Build every trial's `unlearn run` configuration now: a bad value stops the sweep before any trial runs."""
    from unlearn_methods.config import load_run_config

    for trial in spec.trials:
        try:
            load_run_config(None, **spec.trial_config(trial, f"<out>/{trial.id}"))
        except ValueError as e:
            key = "klom.oracle" if trial.oracle else f"methods.{trial.method}" if trial.params or trial.run else "run"
            raise Invalid(key, f"trial {trial.id} ({_describe(trial)}): {e}") from None


def _describe(trial: Trial) -> str:
    return ", ".join([*(f"{k}={v}" for k, v in trial.values.items()), f"seed={trial.seed}"])
