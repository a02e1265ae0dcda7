"""Every aggregate of an lm-eval run recomputed from its logged samples (``lm_eval --log_samples``), with the
functions the tasks themselves aggregate with.

A line of lm-eval's ``samples_<task>_<date>.jsonl`` holds one document's ``doc_id``, ``doc`` and, under each metric's
name, what the task's ``process_results`` returned for it (a number, or for our tasks the document's record: a dict,
a ``(role, value)`` pair). lm-eval computes a metric as ``task.aggregation()[metric](values in document order)``;
:func:`recompute_task` does the same on the logged values:

* our tasks (:class:`harness_ext.task_base.UnlearningTask`): the task class named by its YAML in our task index,
  built without data, model or reference (:func:`aggregation_task`), options from the YAML's metadata and the
  run's ``metric_modes`` (the options that change how metrics are computed); its ``aggregation()`` then runs
  ``compute_metrics`` over the records, as in the run;
* lm-eval's own tasks (``mmlu_*``): the ``metric_list`` aggregation named in lm-eval's YAML (e.g. ``mean``), taken
  from lm-eval's registry.
* ``unlearn judge``'s results (tasks ``judge_<task>``): :func:`unlearn_app.judge.results.aggregates_from_samples`
  over each line's verdict record, at the run's ROUGE-L threshold (its ``metric_modes``).

Groups (:func:`recompute_groups`): scores a group registers with :mod:`harness_ext.group_scores` (LUME's
``final_score`` ...) from the recomputed task values, and lm-eval's ``aggregate_metric_list`` (MMLU's ``acc``) from
the members' recomputed values and sample counts. A group score is computed from recomputed values only (one that
reads a value not recomputed comes out NaN and is reported as not recomputed).

What the samples cannot give is reported with the reason, never guessed: metrics against a reference run (TOFU's
Forget Quality, MUSE's and DUSK's PrivLeak: DUSK's with the reference run's ``dusk_privacy`` samples; TOFU and MUSE
go through :mod:`unlearn_app.leaderboard.validate`'s open-unlearning path), Eval-DU / MQuAKE (their knowledge base)
and WaterDrum's watermark strengths (the verification tokenizer) unless the validator supplies them (``trusted``),
and metrics scored by a classifier model. Paths and model names in a run's options are never read: the samples are
untrusted, so any failure of a task's aggregation on them is a one-line :class:`SamplesError`.
"""

from __future__ import annotations

import functools
import importlib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

#: The filter our tasks' results are reported under (``metric,none``).
FILTER = "none"
#: Option names that say where something is read from (a data folder, a reference, a model or tokenizer): the
#: submitter's are dropped, only the validator's own (``trusted``) are used.
_LOCATION = ("_dir", "path", "reference", "tokenizer", "pretrained", "model", "classifier")


class SamplesError(ValueError):
    """Samples that cannot be read or aggregated; the one-line message names the file and what is wrong."""


@dataclass
class Recomputed:
    """One task's (or group's) metrics recomputed from its samples, and those that could not be, with why."""

    values: dict[str, float] = field(default_factory=dict)
    unverifiable: dict[str, str] = field(default_factory=dict)
    size: int = 0  # documents (a group: its members' total), lm-eval's weight in a group's mean


# --------------------------------------------------------------------------- samples files
# (which file holds a task's samples, on either lm-eval line: harness_ext.results.samples_files)
def parse_samples(data: bytes, name: str) -> list[dict[str, Any]]:
    """The lines of a samples file as dicts, in document order (one line per document and filter)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SamplesError(f"{name}: not UTF-8 (byte {e.start}); give the file lm_eval --log_samples wrote") from None
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except (ValueError, RecursionError) as e:
            raise SamplesError(f"{name} line {n}: not a JSON line of lm-eval's samples ({str(e)[:80]})") from None
        doc_id = row.get("doc_id") if isinstance(row, dict) else None
        if not isinstance(doc_id, int) or isinstance(doc_id, bool) or doc_id < 0:
            raise SamplesError(f"{name} line {n}: not a sample of lm-eval (an object with an integer doc_id)")
        rows.append(row)
    seen: set[tuple[int, str]] = set()
    for row in rows:
        key = (row["doc_id"], str(row.get("filter", FILTER)))
        if key in seen:
            raise SamplesError(f"{name}: document {key[0]} is logged twice (filter {key[1]})")
        seen.add(key)
    return sorted(rows, key=lambda r: r["doc_id"])


# --------------------------------------------------------------------------- task definitions
@functools.cache
def _index_entry(name: str) -> Any:
    """lm-eval's index entry of a task or group (ours, or lm-eval's own), or None for a name it does not know (or
    one that is not a plain task name: the index looks for folders named after it)."""
    from harness_ext.task_index import indexed

    if not re.fullmatch(r"[A-Za-z0-9][\w.-]*", name) or ".." in name:
        return None
    return indexed([name]).get(name)


def _task_class(cfg: Mapping[str, Any]) -> type | None:
    """The Python class a task YAML names with ``class: !function module.Class`` (the index keeps it as a path whose
    last part is the dotted name), or None."""
    spec = cfg.get("class")
    if not isinstance(spec, str):
        return spec if isinstance(spec, type) else None
    dotted = spec.rsplit("/", 1)[-1]
    module, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attr, None) if module.startswith("unlearn_tasks.") else None


def _is_location(key: str) -> bool:
    return any(part in key for part in _LOCATION)


class _Docs(list):
    """The logged documents as a dataset split: iteration gives documents, ``docs["column"]`` a column."""

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return [d.get(key) if isinstance(d, dict) else None for d in self]
        return super().__getitem__(key)


class _Needs(Exception):
    """A task whose aggregation needs what the samples do not carry; the message says what."""


def _base_setup(task: Any, config: dict[str, Any], reference: Any) -> None:
    task.setup(config)


def _with_reference(task: Any, config: dict[str, Any], reference: Any) -> None:
    """TOFU, MUSE, CLEAR, DUSK: options and no reference (what needs one comes out NaN, reported as such), or DUSK's
    AUROCs recomputed from the reference run's samples; no tokenizer (used per document, not in aggregation)."""
    task.setup(config)
    task.reference = reference
    task.tokenizer = None
    task._chat = False
    task.reference_mia = getattr(task.options, "mia_reference", None) is not False


def _leak(task: Any, config: dict[str, Any], reference: Any) -> None:
    """Leak@k (TOFU, MUSE, WMDP): the task's options only; each sample was judged in the run (the records hold the
    flags and the count), so no NLI model is loaded to validate."""
    task.options = task.OPTIONS.from_metadata(config["metadata"])


def _blur(task: Any, config: dict[str, Any], reference: Any) -> None:
    """BLUR: its options; the base-model answers file is per document (in the records), not read here."""
    from unlearn_tasks.blur.options import BlurOptions

    task.options = BlurOptions.from_metadata(config["metadata"] | {"blur_references": "(not read)"})
    task.references = None
    task.chat_template_used = False


def _waterdrum(task: Any, config: dict[str, Any], reference: Any) -> None:
    """WaterDrum: its options and the verification tokenizer the validator names (``trusted``), never the run's."""
    from unlearn_tasks.waterdrum import aggregate
    from unlearn_tasks.waterdrum.tokenizer import as_encoder

    tokenizer = config.get("trusted", {}).get("verify_tokenizer")
    if not tokenizer:
        raise _Needs("the watermark verification tokenizer (give the validator's own as verify_tokenizer)")
    config["metadata"].pop("verify_tokenizer", None)  # a name or an encoder object, not an option value here
    task.setup(config)
    task.encoder = as_encoder(tokenizer)
    task.vocab_size = int(task.options.verify_vocab_size or task.encoder.vocab_size)
    task.ids = aggregate.verification_ids(task.options, [int(d["owner"]) for d in task.test_docs()
                                                         if d.get("kind") == "text"])


def _deep_unlearning(task: Any, config: dict[str, Any], reference: Any) -> None:
    """Eval-DU / MQuAKE: the knowledge base from the validator's own data (``trusted`` data_dir / mquake_path)."""
    trusted = config.get("trusted", {})
    if not (trusted.get("data_dir") or trusted.get("mquake_path")):
        raise _Needs("the knowledge base (give the validator's own Eval-DU data_dir or MQuAKE mquake_path)")
    task.setup(config)


#: How each task class is made ready to aggregate without its data, model or reference (default: its ``setup``).
PREPARE: dict[str, Callable[[Any, dict[str, Any], Any], None]] = {
    "TofuTask": _with_reference, "MuseTask": _with_reference, "ClearTask": _with_reference,
    "DuskTask": _with_reference, "BlurTask": _blur, "WaterDrumTask": _waterdrum,
    "DeepUnlearningTask": _deep_unlearning,
    "TofuLeakTask": _leak, "MuseLeakTask": _leak, "WmdpLeakTask": _leak,
}
#: Metrics scored by a classifier model (never loaded to validate), per task class.
CLASSIFIER_METRICS = {"TofuTask": ("forget_gibberish",), "MuseTask": ("forget_gibberish",)}


def aggregation_task(name: str, docs: list[Any], modes: Mapping[str, Any] | None = None,
                     trusted: Mapping[str, Any] | None = None, reference: Any = None) -> Any:
    """Our task ``name`` made ready to aggregate logged records: built without loading data, model or reference,
    its options from its YAML's metadata, the run's ``modes`` (its options' values by field name, as its provenance
    records them; location options dropped) and the validator's ``trusted`` options; ``docs`` (the logged
    documents) stand for its test split."""
    entry = _index_entry(name)
    cls = _task_class(entry.cfg or {}) if entry is not None else None
    if cls is None:
        raise _Needs(f"{name} is not one of our tasks")
    base = {k: v for k, v in ((entry.cfg or {}).get("metadata") or {}).items() if k != "version"} | dict(trusted or {})
    task = _built(cls, name, docs, base, trusted, reference)
    given = _option_keys(task, modes)
    if given:
        task = _built(cls, name, docs, given | base, trusted, reference)
    if hasattr(task, "options") and hasattr(task.options, "gibberish"):
        task.options.gibberish = False  # a classifier model is never loaded to validate
    return task


def _built(cls: type, name: str, docs: list[Any], metadata: dict[str, Any], trusted: Mapping[str, Any] | None,
           reference: Any) -> Any:
    task = cls.__new__(cls)
    task.run_warnings, task._computed, task._world_size = [], None, 1
    task._config = SimpleNamespace(task=name, test_split="test", metadata=metadata, generation_kwargs={})
    task.dataset = {"test": _Docs(docs)}
    task.test_docs = lambda: task.dataset["test"]  # lm-eval's reads more of its config than the split
    PREPARE.get(cls.__name__, _base_setup)(task, {"task": name, "metadata": dict(metadata),
                                                  "trusted": dict(trusted or {})}, reference)
    return task


def _option_keys(task: Any, modes: Mapping[str, Any] | None) -> dict[str, Any]:
    """The run's option values (``metric_modes``: by field name) under the metadata keys the task's options class
    reads them from; location options and keys it does not read left out."""
    from unlearn_tasks.metadata import MetadataOptions

    options = getattr(task, "options", None)
    if not modes or not isinstance(options, MetadataOptions):
        return {}
    kind = type(options)
    key_of = {field: key for key, field in kind.RENAMED.items()}
    keys = kind.metadata_keys()
    return {key_of.get(k, k): v for k, v in modes.items()
            if key_of.get(k, k) in keys and k not in kind.DERIVED and not _is_location(key_of.get(k, k))}


def _lm_eval_aggregations(cfg: Mapping[str, Any]) -> dict[str, Callable]:
    """``metric -> aggregation`` of one of lm-eval's own tasks, from its YAML's ``metric_list`` (registry names)."""
    from harness_ext.lm_eval_metrics import aggregation

    out = {}
    for item in cfg.get("metric_list") or []:
        if isinstance(item, dict) and isinstance(item.get("metric"), str) and isinstance(item.get("aggregation"), str):
            fn = aggregation(item["aggregation"])
            if fn is not None:
                out[item["metric"]] = fn
    return out


# --------------------------------------------------------------------------- recomputation
def recompute_task(name: str, rows: list[dict[str, Any]], claimed: Mapping[str, float],
                   modes: Mapping[str, Any] | None = None, trusted: Mapping[str, Any] | None = None,
                   reference_rows: list[dict[str, Any]] | None = None, source: str = "samples") -> Recomputed:
    """Every metric in ``claimed`` of task ``name`` recomputed from its samples ``rows`` (see the module docstring);
    ``reference_rows``: the reference run's samples of the same task (DUSK's privacy AUROCs).
    :class:`SamplesError` when the samples do not hold what the task's aggregation reads."""
    out = Recomputed(size=len({r["doc_id"] for r in rows}))
    rows = [r for r in rows if str(r.get("filter", FILTER)) == FILTER]
    from unlearn_app.judge.results import is_judge_task

    if is_judge_task(name):
        return _judge_task(rows, claimed, modes, source, out)
    try:
        aggregations, classifier = _aggregations(name, rows, modes, trusted, reference_rows, source)
    except _Needs as e:
        out.unverifiable = dict.fromkeys(claimed, f"needs {e}")
        return out
    from harness_ext.lm_eval_metrics import parent_metric

    # lm-eval 0.5: a metric reduced over repeats (pass@1(exact_match)) is aggregated as its parent
    aggregations = {**aggregations, **{m: aggregations[p] for m in claimed
                                       if m not in aggregations and (p := parent_metric(m)) in aggregations}}
    for metric in claimed:
        if metric in classifier:
            out.unverifiable[metric] = "scored by a classifier model, not recomputed"
        elif metric not in aggregations:
            out.unverifiable[metric] = "not a metric the task aggregates"
    wanted = [m for m in claimed if m in aggregations and m not in classifier]
    for metric in wanted:
        missing = next((r["doc_id"] for r in rows if metric not in r), None)
        if missing is not None:
            raise SamplesError(f"{source}: document {missing} has no value for {metric}")
        try:
            value = aggregations[metric]([r[metric] for r in rows])
            value = float(value)
        except Exception as e:  # untrusted values through task code: any failure is the samples' fault
            raise SamplesError(f"{source}: {metric} cannot be aggregated from these samples "
                               f"({type(e).__name__}: {str(e)[:80]})") from None
        if math.isnan(value) and not math.isnan(float(claimed[metric])):
            out.unverifiable[metric] = "not computable from the samples alone (a reference run or data it needs)"
        else:
            out.values[metric] = value
    return out


def _judge_task(rows: list[dict[str, Any]], claimed: Mapping[str, float], modes: Mapping[str, Any] | None,
                source: str, out: Recomputed) -> Recomputed:
    """``unlearn judge``'s aggregates from its per-item verdict records, at the run's ROUGE-L threshold."""
    from unlearn_app.judge.results import aggregates_from_samples, threshold_of

    try:
        threshold_of(modes)  # a threshold that is no number in [0, 1] is the samples' fault
        values = aggregates_from_samples(rows, modes)
    except (ValueError, TypeError, KeyError) as e:
        raise SamplesError(f"{source}: {str(e)[:120]}") from None
    for metric in claimed:
        if metric not in values:
            out.unverifiable[metric] = "not a metric the judge aggregates"
        elif math.isnan(values[metric]) and not math.isnan(float(claimed[metric])):
            out.unverifiable[metric] = "not computable from the verdicts (no parsable verdict)"
        else:
            out.values[metric] = values[metric]
    return out


def _aggregations(name: str, rows: list[dict[str, Any]], modes: Mapping[str, Any] | None,
                  trusted: Mapping[str, Any] | None, reference_rows: list[dict[str, Any]] | None,
                  source: str) -> tuple[dict[str, Callable], tuple[str, ...]]:
    entry = _index_entry(name)
    if entry is None:
        raise _Needs(f"a task lm-eval knows ({name} is not one)")
    cfg = entry.cfg or {}
    if _task_class(cfg) is None:
        aggs = _lm_eval_aggregations(cfg)
        if not aggs:
            raise _Needs(f"{name}'s metric_list (its YAML names no aggregation)")
        return aggs, ()
    docs = [r.get("doc") for r in rows]
    reference = None
    cls_name = _task_class(cfg).__name__
    if cls_name == "DuskTask" and reference_rows:
        reference = _dusk_reference(name, reference_rows, modes, trusted, source)
    try:
        task = aggregation_task(name, docs, modes, trusted, reference)
        return task.aggregation(), CLASSIFIER_METRICS.get(cls_name, ())
    except _Needs:
        raise
    except Exception as e:  # the run's options and logged documents are untrusted too
        raise SamplesError(f"{source}: {name} cannot be set up from the run's options and logged documents "
                           f"({type(e).__name__}: {str(e)[:80]})") from None


def _dusk_reference(name: str, rows: list[dict[str, Any]], modes: Mapping[str, Any] | None,
                    trusted: Mapping[str, Any] | None, source: str) -> Any:
    """DUSK's reference AUROCs (what ``DuskReference.auc`` holds) recomputed from the reference run's samples."""
    names = ("auc_forget_holdout", "auc_holdout_retain")
    again = recompute_task(name, rows, dict.fromkeys(names, 0.0), modes, trusted, None, f"reference {source}")
    return SimpleNamespace(auc={k: again.values[k] for k in names if k in again.values}, path=None)


class _Reads(Mapping):
    """``{task: {metric: value}}`` that notes every ``(task, metric)`` read through it (a group score's inputs)."""

    def __init__(self, data: Mapping[str, Mapping[str, float]], read: set[tuple[str, str]], task: str | None = None):
        self._data, self._read, self._task = data, read, task

    def __getitem__(self, key: str) -> Any:
        if self._task is None:
            return _Reads(self._data[key], self._read, key)
        self._read.add((self._task, key))
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        if self._task is None:
            return _Reads(self._data.get(key, {}), self._read, key)
        self._read.add((self._task, key))
        return self._data.get(key, default)

    def __iter__(self):
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def recompute_groups(claimed: Mapping[str, Mapping[str, float]], done: dict[str, Recomputed]) -> dict[str, Recomputed]:
    """The metrics of the groups among ``claimed`` (``{group: {metric: value}}``) recomputed from the values in
    ``done`` (``{task: Recomputed}``; the groups are added to it, and a group's member groups before it)."""
    out = {}
    for group, metrics in claimed.items():
        if group not in done and (rec := _group(group, set(metrics), done, frozenset())) is not None:
            out[group] = rec
    return out


def _group(group: str, wanted: set[str] | None, done: dict[str, Recomputed], seen: frozenset[str]) -> Recomputed | None:
    """One group's ``wanted`` metrics (None: every metric of its ``aggregate_metric_list``), or None if ``group``
    is not a group lm-eval knows."""
    from harness_ext import group_scores
    from harness_ext.lm_eval_metrics import pooled_mean

    entry = _index_entry(group)
    if entry is None or (entry.cfg or {}).get("group") != group or group in seen:
        return None
    members = _members(entry.cfg)
    for m in members:
        if m not in done:
            _group(m, None, done, seen | {group})
    aggregated = {i["metric"]: bool(i.get("weight_by_size", True)) for i in entry.cfg.get("aggregate_metric_list") or []
                  if isinstance(i, dict) and isinstance(i.get("metric"), str)}
    wanted = set(aggregated) if wanted is None else wanted
    rec = Recomputed(size=sum(done[m].size for m in members if m in done))
    if group in group_scores.GROUP_SCORES:
        read: set[tuple[str, str]] = set()
        scores = group_scores.GROUP_SCORES[group](_Reads({t: dict(r.values) for t, r in done.items()}, read))
        unread = sorted(f"{t}/{m}" for t, m in read if m not in done.get(t, Recomputed()).values)
        for metric in wanted & set(scores):  # it sees recomputed values only: a number is recomputed, NaN is not
            if math.isnan(float(scores[metric])):
                rec.unverifiable[metric] = f"reads {', '.join(unread[:3]) or 'a value'} not recomputed"
            else:
                rec.values[metric] = float(scores[metric])
    for metric in (wanted & set(aggregated)) - set(rec.values) - set(rec.unverifiable):
        parts = [done.get(m) for m in members]
        if not members or any(p is None or metric not in p.values for p in parts):
            rec.unverifiable[metric] = "a member's value is not recomputed"
        else:
            rec.values[metric] = float(pooled_mean([p.values[metric] for p in parts],
                                                                 [p.size for p in parts], aggregated[metric]))
    for metric in wanted - set(rec.values) - set(rec.unverifiable):
        rec.unverifiable[metric] = "the group does not compute it"
    done[group] = rec
    return rec


def _members(cfg: Mapping[str, Any]) -> list[str]:
    """A group's tasks and groups as lm-eval's index names them (a tag stands for the tasks it tags)."""
    from harness_ext.task_index import is_tag

    members = cfg.get("task") or []
    out = []
    for m in [m for m in ([members] if isinstance(members, str) else members) if isinstance(m, str)]:
        entry = _index_entry(m)
        out += sorted(entry.tags) if is_tag(entry) else [m]
    return out


def recompute_run(results: Mapping[str, Any], samples: Mapping[str, list[dict[str, Any]]],
                  reference_samples: Mapping[str, list[dict[str, Any]]] | None = None,
                  trusted: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Recomputed]:
    """Every task's and group's metrics of a parsed lm-eval results file recomputed from ``samples``
    (``{task: parse_samples(...)}``); a task without samples has every metric unverifiable. ``trusted``: per task,
    the validator's own options (e.g. ``{"evaldu": {"data_dir": ...}}``)."""
    from harness_ext.results import task_metrics

    claimed = task_metrics(dict(results))
    configs = results.get("configs") or {}
    done: dict[str, Recomputed] = {}
    for task, metrics in claimed.items():
        if task not in samples:
            continue
        modes = ((configs.get(task) or {}).get("provenance") or {}).get("metric_modes")
        done[task] = recompute_task(task, samples[task], metrics, modes if isinstance(modes, dict) else None,
                                    (trusted or {}).get(task), (reference_samples or {}).get(task),
                                    f"samples of {task}")
    recompute_groups({g: m for g, m in claimed.items() if g not in done}, done)
    for task, metrics in claimed.items():
        done.setdefault(task, Recomputed(unverifiable=dict.fromkeys(metrics, "no samples (--log_samples)")))
    return done
