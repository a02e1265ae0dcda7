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
    resources: {cpus: 1, gpus: 0, max_retries: 2}    # per trial (the Ray engine declares them)
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

import yaml

from unlearn_app.ci.checks import Check, CheckSyntaxError, parse_check
from unlearn_app.selection import Selection, SelectionError, parse_select

KEYS = {
    "model": "model folder or Hub id to unlearn from, or a list of them",
    "data": "dataset, as `unlearn run --data` (tofu, demo, muse_news, ...)",
    "data_dir": "local folder of the dataset",
    "forget": "forget split, or a list of them",
    "retain": "retain split (default: the one matching each forget split)",
    "seeds": "list of seeds (each setting runs once per seed)",
    "run": "mapping of shared `unlearn run` options (epochs, lr, batch_size, lora, ...)",
    "methods": "mapping of method name to {} (its defaults), {grid: ...} or {random: ...}",
    "evaluation": "mapping: tasks, limit, metadata, reference, baseline, checks",
    "select": "rule choosing each method's setting, TASK/METRIC:max or :min (mean over seeds)",
    "select_if": "list of checks a setting's mean must pass to be selected",
    "pareto": "mapping {utility: EXPR:max|min, forget: EXPR:max|min}: the axes of the trade-off picture",
    "resources": "mapping {cpus, gpus, max_retries} per trial",
    "stages": "mapping {sequential: [forget splits]}: each setting unlearned on the splits one after another",
    "klom": "mapping {task, oracle: {model, ...}, ulira, split}: KLoM / U-LiRA of each setting's seeds against "
            "oracle models (retain_ft from oracle.model, one per seed)",
    "attacks": "mapping {quantize: {bits, group_size}, relearn: {steps, lr, ...}}: attacks on every trial's checkpoint",
    "early_stop": "mapping {metric: TASK/METRIC, below: X, above: Y}: stop a trial (Ray Tune, --engine ray) when an "
                  "evaluation during unlearning crosses a bound",
}
EARLY_STOP_KEYS = {"metric": "TASK/METRIC of the evaluation-during-unlearning rows",
                   "below": "stop when the metric is below this number", "above": "stop when it is above this number"}
EVAL_KEYS = {
    "tasks": "list of lm-eval tasks run on every trial's checkpoint",
    "limit": "documents per task (smoke runs)",
    "metadata": "mapping of task options (lm_eval --metadata)",
    "reference": "reference run folder, or {forget10: DIR, ...}",
    "baseline": "results of the model before unlearning (lm-eval output folder or `unlearn ci` folder)",
    "checks": "list of `unlearn ci` checks recorded for every trial",
}
METHOD_KEYS = {"grid": "mapping of parameter to a list of values",
               "random": "mapping {trials: N, seed: S, space: {parameter: [values] or {low, high, log}}}"}
RESOURCE_KEYS = {"cpus": "CPU cores per trial (also its torch threads)", "gpus": "GPUs per trial",
                 "max_retries": "times the Ray engine reruns a trial whose worker died"}
#: The most of each resource one trial may ask for (more is a typo: no machine has it).
RESOURCE_MAX = {"cpus": 1024, "gpus": 64, "max_retries": 100}
#: The most trials one spec may expand to (a larger grid or random search is refused before it is built).
MAX_TRIALS = 10_000
#: RunConfig fields a spec may not set in ``run`` (the sweep sets them per trial).
SWEEP_OWNED = {"method", "model", "out", "data", "data_dir", "forget", "retain", "seed", "method_params",
               "eval_tasks", "eval_limit", "eval_metadata", "push_to_hub", "resume", "overwrite", "progress"}


class SpecError(ValueError):
    """A sweep spec that cannot be used; the message names the file, the key and the fix."""


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
    tasks: list[str] = field(default_factory=list)
    limit: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    reference: str | dict[str, str] | None = None
    baseline: str | None = None
    checks: list[Check] = field(default_factory=list)

    def task_metadata(self) -> dict[str, Any]:
        return {**self.metadata, **({"reference": self.reference} if self.reference is not None else {})}


@dataclass
class Spec:
    path: str
    text: str
    data: dict[str, Any]  # data, data_dir, retain: the dataset options shared by every trial
    trials: list[Trial]
    evaluation: Evaluation
    select: Selection | None = None
    pareto: dict[str, Selection] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=lambda: {"cpus": 1, "gpus": 0, "max_retries": 2})
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


def _key_lines(text: str) -> dict[str, int]:
    """Line (1-based) of every mapping key, by dotted path (``methods.npo.grid.beta``)."""
    lines: dict[str, int] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                path = f"{prefix}.{key.value}" if prefix else str(key.value)
                lines[path] = key.start_mark.line + 1
                walk(value, path)

    try:
        walk(yaml.compose(text), "")
    except yaml.YAMLError:
        pass
    return lines


def load_spec(path: str | Path) -> Spec:
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"sweep spec {path} does not exist")
    return parse_spec(path.read_text(encoding="utf-8"), str(path))


def parse_spec(text: str, where: str = "<spec>") -> Spec:
    """Read, validate and expand a spec into its trials; :class:`SpecError` names what to fix."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise SpecError(f"{where}:{f' line {mark.line + 1}' if mark else ''} is not valid YAML "
                        f"({getattr(e, 'problem', e)})") from None
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: expected a YAML mapping with at least 'model' and 'methods'")
    lines = _key_lines(text)

    def err(key: str, message: str) -> SpecError:
        line = lines.get(key) or lines.get(key.rpartition(".")[0])
        return SpecError(f"{where}:{f' line {line}:' if line else ''} {key}: {message}")

    def mapping(value: Any, key: str, known: dict[str, str]) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise err(key, "expected a mapping with keys " + ", ".join(known))
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise err(f"{key}.{unknown[0]}" if key else unknown[0],
                      f"unknown key; the keys are {', '.join(known)}")
        return value

    mapping(raw, "", KEYS)
    models = _strings(raw.get("model"), "model", err)
    forgets = _strings(raw.get("forget", "forget10"), "forget", err)
    sequence = _sequence(raw, err)
    seeds = raw.get("seeds", [0])
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        seeds = [seeds]
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) and not isinstance(s, bool)
                                                           for s in seeds):
        raise err("seeds", "give a list of integers, e.g. seeds: [0, 1, 2]")
    if len(set(seeds)) != len(seeds):
        raise err("seeds", f"a seed is listed twice ({seeds})")
    shared = raw.get("run") or {}
    if not isinstance(shared, dict):
        raise err("run", KEYS["run"])
    from unlearn_methods.config import RunConfig

    run_fields = {f.name for f in dataclasses.fields(RunConfig)}
    for key in shared:
        if key in SWEEP_OWNED:
            raise err(f"run.{key}", "is set by the sweep for each trial (use the spec's own key: model, data, "
                      "forget, seeds, methods, evaluation)")
        if key not in run_fields:
            raise err(f"run.{key}", f"unknown `unlearn run` option; known: {', '.join(sorted(run_fields - SWEEP_OWNED))}")
    data = {k: raw[k] for k in ("data", "data_dir", "retain") if raw.get(k) is not None}
    evaluation = _evaluation(mapping(raw.get("evaluation"), "evaluation", EVAL_KEYS), err)
    klom = _klom(mapping(raw.get("klom"), "klom", KLOM_KEYS), raw, forgets, sequence, seeds, shared, run_fields, err)
    if klom and klom["task"] not in evaluation.tasks:  # every trial (unlearned and oracle) scores the margins
        evaluation.tasks.append(klom["task"])
    methods = raw.get("methods")
    if not isinstance(methods, dict) or not methods:
        raise err("methods", "give a mapping of method names, e.g. methods: {graddiff: {}, npo: {grid: {beta: [0.1, 0.5]}}}")
    resources = {"cpus": 1, "gpus": 0, "max_retries": 2, **mapping(raw.get("resources"), "resources", RESOURCE_KEYS)}
    for key, value in resources.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0 or (
                key != "gpus" and not float(value).is_integer()):
            raise err(f"resources.{key}", f"expected a non-negative number ({RESOURCE_KEYS[key]}), got {value!r}")
        if value > RESOURCE_MAX[key]:
            raise err(f"resources.{key}", f"{value:g} is more than {RESOURCE_MAX[key]} ({RESOURCE_KEYS[key]})")
    if resources["cpus"] < 1:
        raise err("resources.cpus", "a trial needs at least 1 CPU")

    settings = {method: _settings(str(method), mapping(body, f"methods.{method}", METHOD_KEYS), run_fields, err)
                for method, body in methods.items()}
    per_setting = len(models) * len(sequence or forgets) * len(seeds)
    _cap(sum(map(len, settings.values())) * per_setting, "methods", err,
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
                                             sequence=sequence, stage=stage, after=after))
                continue
            for model, forget, seed in itertools.product(models, forgets, seeds):
                trials.append(_trial(str(method), model, forget, seed, params, run, data, evaluation, values,
                                     named=len(forgets) > 1))
    if klom:  # the oracle ensemble: retain-only training from oracle.model, one model per seed (and split)
        oracle_run = {**shared, **klom["oracle_run"]}
        for forget, seed in itertools.product(forgets, seeds):
            trials.append(_trial("retain_ft", klom["oracle_model"], forget, seed, {}, oracle_run, data, evaluation,
                                 {}, named=len(forgets) > 1, oracle=True))
    ids = [t.id for t in trials]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise err("methods", f"two trials are the same run ({dup}); remove the repeated value")
    if sequence and shared.get("lora", True) and not shared.get("merge", False):
        raise err("stages.sequential", "a stage unlearns the previous stage's checkpoint, which must be full "
                  "weights: add merge: true (or lora: false) under run:")
    attacks = _attacks(raw.get("attacks"), shared, methods, evaluation, err)
    spec = Spec(where, text, data, trials, evaluation, resources=resources, attacks=attacks, klom=klom)
    _check_configs(spec, err)
    spec.select = _rule(raw.get("select"), raw.get("select_if") or [], "select", evaluation, err)
    pareto = mapping(raw.get("pareto"), "pareto", {"utility": "EXPR:max|min", "forget": "EXPR:max|min"})
    if pareto and set(pareto) != {"utility", "forget"}:
        raise err("pareto", "give both utility: and forget:, each TASK/METRIC:max or :min")
    spec.pareto = {axis: _rule(rule, [], f"pareto.{axis}", evaluation, err) for axis, rule in pareto.items()}
    spec.early_stop = _early_stop(mapping(raw.get("early_stop"), "early_stop", EARLY_STOP_KEYS), trials, evaluation,
                                  err) if raw.get("early_stop") is not None else None
    return spec


RELEARN_KEYS = {"steps": "optimiser steps (default 20)", "lr": "learning rate (default 1e-5)",
                "batch_size": "batch size (default 4)",
                "relearn_fraction": "share of the forget split shown (default 0.5)",
                "relearn_data": "related corpus shown instead of forget items (a .jsonl/.json/.csv/.parquet file)",
                "seed": "seed of the shown / held-out split and the training (default: the trial's seed)"}


def _early_stop(raw: dict[str, Any], trials: list[Trial], evaluation: Evaluation, err) -> dict[str, Any]:
    """``early_stop: {metric: TASK/METRIC, below: X, above: Y}``: checked here; every trial evaluates during
    unlearning (``run: {eval_every: N}``), and the metric's task is one the evaluation runs."""
    metric = raw.get("metric")
    if not isinstance(metric, str) or metric.count("/") != 1 or not all(metric.split("/")):
        raise err("early_stop.metric", f"expected TASK/METRIC, e.g. {(evaluation.tasks or ['tofu_forget10'])[0]}"
                  f"/model_utility, got {metric!r}")
    if metric.split("/")[0] not in evaluation.tasks:
        raise err("early_stop.metric", f"names {metric.split('/')[0]}, which evaluation.tasks does not run "
                  f"({evaluation.tasks or 'none'})")
    bounds = {k: raw[k] for k in ("below", "above") if raw.get(k) is not None}
    if not bounds:
        raise err("early_stop", "give below: X and/or above: Y (the bounds that stop a trial)")
    for key, value in bounds.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            raise err(f"early_stop.{key}", f"expected a number, got {value!r}")
    if not all(t.run.get("eval_every") for t in trials):
        raise err("early_stop", "acts on the evaluation during unlearning: add eval_every: N (steps) under run:")
    return {"metric": metric, "below": bounds.get("below"), "above": bounds.get("above")}


def _attacks(raw: Any, shared: dict[str, Any], methods: dict[str, Any], evaluation: Evaluation,
             err) -> dict[str, dict[str, Any]]:
    """``attacks: {quantize: {bits, group_size}, relearn: {steps, lr, ...}}``: checked here; the checkpoint must be
    full weights."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or set(raw) - {"quantize", "relearn"} or not raw:
        raise err("attacks", "expected {quantize: {bits: 4 or 8, group_size: N}} and/or {relearn: {steps, lr, "
                  "batch_size, relearn_fraction, relearn_data, seed}}")
    if shared.get("lora", True) and not shared.get("merge", False):
        name = "quantize" if "quantize" in raw else "relearn"
        verb = "quantizes" if name == "quantize" else "fine-tunes"
        raise err(f"attacks.{name}", f"{verb} full weights: add merge: true (or lora: false) under run:")
    attacks: dict[str, dict[str, Any]] = {}
    if "quantize" in raw:
        quantize = raw.get("quantize") or {}
        if not isinstance(quantize, dict) or set(quantize) - {"bits", "group_size"}:
            raise err("attacks.quantize", "expected {bits: 4 or 8, group_size: N}")
        if quantize.get("bits") not in (4, 8):
            raise err("attacks.quantize.bits", f"must be 4 or 8, got {quantize.get('bits')!r}")
        group = quantize.get("group_size")
        if group is not None and (not isinstance(group, int) or isinstance(group, bool) or group <= 0):
            raise err("attacks.quantize.group_size", "expected a positive integer")
        if not evaluation.tasks:
            raise err("attacks", "an attacked checkpoint is evaluated on evaluation.tasks: give them")
        attacks["quantize"] = {"bits": quantize["bits"], "group_size": group}
    if "relearn" in raw:
        attacks["relearn"] = _relearn(raw.get("relearn") or {}, err)
    return attacks


def _relearn(raw: Any, err) -> dict[str, Any]:
    """``attacks.relearn``: the options of `unlearn attack relearn`, typed and range-checked."""
    if not isinstance(raw, dict):
        raise err("attacks.relearn", "expected a mapping with keys " + ", ".join(RELEARN_KEYS))
    unknown = sorted(set(raw) - set(RELEARN_KEYS))
    if unknown:
        raise err(f"attacks.relearn.{unknown[0]}", f"unknown key; the keys are {', '.join(RELEARN_KEYS)}")
    opts: dict[str, Any] = {"steps": 20, "lr": 1e-5, "batch_size": 4, "relearn_fraction": None,
                            "relearn_data": None, "seed": None}
    for key, value in raw.items():
        key_path = f"attacks.relearn.{key}"
        if key == "relearn_data":
            if not isinstance(value, str) or not value:
                raise err(key_path, "expected the path of a related corpus")
            if not Path(value).is_file():
                raise err(key_path, f"{value} is not a file (paths are read from the folder unlearn sweep runs in)")
        elif key in ("steps", "batch_size", "seed"):
            if not isinstance(value, int) or isinstance(value, bool) or value < (0 if key == "seed" else 1):
                raise err(key_path, f"expected a {'non-negative' if key == 'seed' else 'positive'} integer")
        else:
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise err(key_path, f"expected a number, got {value!r}") from None
            if key == "lr" and not value > 0:
                raise err(key_path, f"must be positive, got {value}")
            if key == "relearn_fraction" and not 0 < value < 1:
                raise err(key_path, f"must be between 0 and 1 (exclusive), got {value}")
        opts[key] = value
    return opts


KLOM_KEYS = {"task": "margins task scored on every checkpoint (default margins_tofu_<forget> for tofu / demo data)",
             "oracle": "mapping: model (the oracles' starting point, before training on the dataset) and any "
                       "`unlearn run` options of the oracle runs (method retain_ft)",
             "ulira": "also U-LiRA (default true)",
             "split": "split of the margins task shown in the leaderboard (default forget)"}


def _klom(raw: dict[str, Any], spec: dict[str, Any], forgets: list[str], sequence: list[str], seeds: list[int],
          shared: dict[str, Any], run_fields: set[str], err) -> dict[str, Any]:
    """``klom:``: the margins task, the oracle runs' options; an ensemble is the seeds, so at least two."""
    if not raw:
        return {}
    if sequence:
        raise err("klom", "KLoM ensembles are not combined with stages.sequential")
    if len(seeds) < 2:
        raise err("klom", f"an ensemble is one model per seed: give at least two seeds (seeds: {seeds})")
    task = raw.get("task")
    if task is None:
        if spec.get("data", "tofu") not in ("tofu", "demo") or len(forgets) > 1:
            raise err("klom.task", "give the margins task (e.g. margins_tofu_forget10, or margins with "
                      "data_file in evaluation.metadata)")
        task = f"margins_tofu_{forgets[0]}"
    if not isinstance(task, str) or not task.startswith("margins"):
        raise err("klom.task", f"expected a margins task (margins, margins_tofu_forget10, ...), got {task!r}")
    oracle = raw.get("oracle")
    if not isinstance(oracle, dict) or not isinstance(oracle.get("model"), str) or not oracle["model"]:
        raise err("klom.oracle", "give {model: DIR, ...}: the model the oracles are trained from on the retain "
                  "split (the target's starting point), and any `unlearn run` options (epochs, lr, ...)")
    options = {k: v for k, v in oracle.items() if k != "model"}
    for key in options:
        if key in SWEEP_OWNED or key not in run_fields:
            raise err(f"klom.oracle.{key}", "not an `unlearn run` option the oracle runs may set; known: "
                      f"{', '.join(sorted(run_fields - SWEEP_OWNED))}")
    ulira = raw.get("ulira", True)
    if not isinstance(ulira, bool):
        raise err("klom.ulira", "expected true or false")
    split = raw.get("split", "forget")
    if not isinstance(split, str) or not split:
        raise err("klom.split", "expected a split name of the margins task (forget, retain, holdout)")
    return {"task": task, "oracle_model": oracle["model"], "oracle_run": options, "ulira": ulira, "split": split}


def _sequence(raw: dict[str, Any], err) -> list[str]:
    """``stages: {sequential: [split, ...]}``: the forget splits unlearned one after another (MUSE-style)."""
    stages = raw.get("stages")
    if stages is None:
        return []
    if not isinstance(stages, dict) or set(stages) != {"sequential"}:
        raise err("stages", "expected {sequential: [forget split, forget split, ...]}")
    splits = stages["sequential"]
    if not isinstance(splits, list) or len(splits) < 2 or not all(isinstance(v, str) and v for v in splits):
        raise err("stages.sequential", "give a list of at least two forget splits, unlearned in that order")
    if "forget" in raw:
        raise err("forget", "stages.sequential gives the forget splits of the stages; drop forget:")
    return list(splits)


def _strings(value: Any, key: str, err) -> list[str]:
    if isinstance(value, str) and value:
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return list(dict.fromkeys(value))
    raise err(key, f"expected a string or a list of strings ({KEYS[key]})")


def _evaluation(raw: dict[str, Any], err) -> Evaluation:
    tasks = raw.get("tasks") or []
    if isinstance(tasks, str):
        tasks = [t.strip() for t in tasks.split(",") if t.strip()]
    if not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
        raise err("evaluation.tasks", "give a list of lm-eval task names, e.g. tasks: [tofu_forget10]")
    limit = raw.get("limit")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0):
        raise err("evaluation.limit", "expected a positive integer")
    if not isinstance(raw.get("metadata") or {}, dict):
        raise err("evaluation.metadata", "expected a mapping of task options")
    reference, baseline = raw.get("reference"), raw.get("baseline")
    if reference is not None and not isinstance(reference, (str, dict)):
        raise err("evaluation.reference", EVAL_KEYS["reference"])
    if baseline is not None and not isinstance(baseline, str):
        raise err("evaluation.baseline", f"expected a path: {EVAL_KEYS['baseline']}")
    raw_checks = raw.get("checks") or []
    if not isinstance(raw_checks, list):
        raise err("evaluation.checks", "give a list, one check per item")
    checks = []
    for text in raw_checks:
        try:
            check = parse_check(text)
        except CheckSyntaxError as e:
            raise err("evaluation.checks", f"bad check: {e}") from None
        _known_tasks(check.refs, tasks, f"check {check.text!r}", "evaluation.checks", err)
        if baseline is None and "baseline" in check.text:
            raise err("evaluation.checks", f"{check.text!r} uses baseline; add evaluation.baseline: DIR")
        checks.append(check)
    if checks and not tasks:
        raise err("evaluation.checks", "checks need evaluation.tasks")
    return Evaluation(list(tasks), limit, dict(raw.get("metadata") or {}), reference, baseline, checks)


def _known_tasks(found, tasks: list[str], what: str, key: str, err) -> None:
    unknown = [r.task for r in found if r.task not in tasks]
    if unknown:
        raise err(key, f"{what} names {unknown[0]}, which evaluation.tasks does not run ({tasks or 'none'})")


def _rule(text: Any, conditions: Any, key: str, evaluation: Evaluation, err) -> Selection | None:
    if text is None:
        if conditions:
            raise err("select_if", "needs select: TASK/METRIC:max|min")
        return None
    if not isinstance(conditions, list):
        raise err("select_if", "give a list of checks")
    try:
        rule = parse_select(text, conditions)
    except SelectionError as e:
        raise err(key, str(e).replace("--select-if", "select_if").replace("--select", key)) from None
    _known_tasks([r for c in [rule] for r in _refs(c)], evaluation.tasks, f"{text!r}", key, err)
    if evaluation.baseline is None and any("baseline" in c.text for c in rule.conditions):
        raise err("select_if", "a check uses baseline; add evaluation.baseline: DIR")
    return rule


def _refs(rule: Selection):
    from unlearn_app.ci.checks import refs

    return refs(rule.expression) + [r for c in rule.conditions for r in c.refs]


# --------------------------------------------------------------------------- the settings of a method
def _declared(method: str, err) -> type:
    from unlearn_methods import all_methods

    methods = all_methods()
    cls = methods.get(method.lower().replace("-", "_"))
    if cls is None:
        raise err(f"methods.{method}", f"unknown method; available: {', '.join(sorted(methods))}")
    return cls


def _settings(method: str, body: dict[str, Any], run_fields: set[str], err) -> list[dict[str, Any]]:
    """The method's settings (parameter -> value as its declared type), in a fixed order: the grid's product or
    the random draws."""
    cls = _declared(method, err)
    settings = _raw_settings(method, body, cls.Params.types(), run_fields, err)
    from unlearn_methods.config import RunConfig, coerce

    hints = typing.get_type_hints(RunConfig)
    typed = []
    for values in settings:
        try:
            params = cls.Params.from_dict({k: v for k, v in values.items() if k not in run_fields}, method).to_dict()
            typed.append({k: params[k] if k in params else coerce(v, hints[k], k) for k, v in values.items()})
        except ValueError as e:
            raise err(f"methods.{method}", str(e)) from None
    return typed


def _raw_settings(method: str, body: dict[str, Any], types: dict[str, Any], run_fields: set[str],
                  err) -> list[dict[str, Any]]:
    if "grid" in body and "random" in body:
        raise err(f"methods.{method}", "give grid: or random:, not both")

    def known(name: str, key: str) -> None:
        if name not in types and (name not in run_fields or name in SWEEP_OWNED):
            raise err(f"{key}.{name}", f"{method} has no parameter {name!r}; it takes "
                      f"{', '.join(types) or 'none'} (`unlearn methods`), or give an `unlearn run` option such as lr")

    if "grid" in body:
        grid = body["grid"]
        key = f"methods.{method}.grid"
        if not isinstance(grid, dict) or not grid:
            raise err(key, METHOD_KEYS["grid"])
        for name, values in grid.items():
            known(name, key)
            if not isinstance(values, list) or not values:
                raise err(f"{key}.{name}", f"give a list of values, e.g. {name}: [0.1, 0.5]")
        names = list(grid)
        _cap(math.prod(len(grid[n]) for n in names), key, err)
        return [dict(zip(names, combo)) for combo in itertools.product(*(grid[n] for n in names))]
    if "random" in body:
        key = f"methods.{method}.random"
        rnd = body["random"]
        if not isinstance(rnd, dict) or set(rnd) - {"trials", "seed", "space"}:
            raise err(key, METHOD_KEYS["random"])
        n, space = rnd.get("trials"), rnd.get("space")
        if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
            raise err(f"{key}.trials", "expected a positive number of settings to draw")
        _cap(n, f"{key}.trials", err)
        if not isinstance(space, dict) or not space:
            raise err(f"{key}.space", "give a mapping of parameter to [values] or {low, high, log}")
        hints = dict(types)
        from unlearn_methods.config import RunConfig

        hints.update({k: v for k, v in typing.get_type_hints(RunConfig).items() if k not in hints})
        for name, dist in space.items():
            known(name, f"{key}.space")
            _check_distribution(dist, f"{key}.space.{name}", hints[name], err)
        rng = random.Random(f"{method}:{rnd.get('seed', 0)}")  # a string seed: the same draws on every platform
        return [{name: _draw(rng, dist, hints[name]) for name, dist in space.items()} for _ in range(n)]
    return [{}]


def _cap(count: int, key: str, err, what: str = "settings") -> None:
    """Refuse more than :data:`MAX_TRIALS` settings or trials, before they are built."""
    if count > MAX_TRIALS:
        raise err(key, f"{count} {what}; a sweep runs at most {MAX_TRIALS} trials: make the grid or the random "
                  "search smaller (or split it into several sweeps)")


def _is_int(tp: Any) -> bool:
    return int in (typing.get_args(tp) or (tp,)) and float not in (typing.get_args(tp) or (tp,))


def _check_distribution(dist: Any, key: str, tp: Any, err) -> None:
    if isinstance(dist, list) and dist:
        return
    if not isinstance(dist, dict) or set(dist) - {"low", "high", "log"} or not {"low", "high"} <= set(dist):
        raise err(key, "give a list of values or {low: A, high: B, log: true|false}")
    low, high = dist["low"], dist["high"]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)) or not low < high:
        raise err(key, f"low and high must be numbers with low < high, got {low!r} and {high!r}")
    if dist.get("log") and low <= 0:
        raise err(key, f"log: true needs low > 0, got {low}")
    if _is_int(tp) and not (float(low).is_integer() and float(high).is_integer()):
        raise err(key, "the parameter is an integer: give integer low and high")


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
           oracle: bool = False) -> Trial:
    """Ids: ``METHOD-HASH``; with several forget splits ``METHOD-SPLIT-HASH``; a sequential stage
    ``METHOD-HASH-sK``, the hash shared by the stages of one chain (it covers the whole sequence)."""
    setting = {"method": method, "model": model, "forget": forget, "params": params, "run": run, "data": data,
               "evaluation": {"tasks": evaluation.tasks, "limit": evaluation.limit,
                              "metadata": evaluation.task_metadata()}}
    if sequence:
        chain = {**setting, "forget": None, "sequence": sequence}
        return Trial(f"{method}-{_digest({**chain, 'seed': seed})}-s{stage}", f"{method}-{_digest(chain)}-s{stage}",
                     method, model, forget, seed, dict(params), dict(run), dict(values), stage, after)
    prefix = "oracle" if oracle else method
    prefix = f"{prefix}-{forget}" if named else prefix
    return Trial(f"{prefix}-{_digest({**setting, 'seed': seed})}", f"{prefix}-{_digest(setting)}", method, model,
                 forget, seed, dict(params), dict(run), dict(values), oracle=oracle)


def _check_configs(spec: Spec, err) -> None:
    """Build every trial's `unlearn run` configuration now: a bad value stops the sweep before any trial runs."""
    from unlearn_methods.config import load_run_config

    for trial in spec.trials:
        try:
            load_run_config(None, **spec.trial_config(trial, f"<out>/{trial.id}"))
        except ValueError as e:
            key = "klom.oracle" if trial.oracle else f"methods.{trial.method}" if trial.params or trial.run else "run"
            raise err(key, f"trial {trial.id} ({_describe(trial)}): {e}") from None


def _describe(trial: Trial) -> str:
    return ", ".join([*(f"{k}={v}" for k, v in trial.values.items()), f"seed={trial.seed}"])
