"""What a sweep spec names outside itself, checked before the first trial trains (as `unlearn ci` checks its suite):
the evaluation's tasks are tasks lm-eval knows, its metadata keys are keys some benchmark reads, the reference and
baseline exist (the baseline is read), and every ``TASK/METRIC`` in ``checks``, ``select``, ``select_if``,
``pareto`` and ``early_stop`` is a metric its task reports where that is known without running it (the baseline's
results, an lm-eval task's ``metric_list``); the rest is checked against the first finished trial's results
(:func:`check_results_names`). The spec's own syntax is :mod:`unlearn_app.sweep.spec`'s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from unlearn_app.ci.checks import Check, Ref, refs, uses_baseline
from unlearn_app.sweep.spec import Spec, SpecError


def _error(spec: Spec, key: str, message: str) -> SpecError:
    """``SPEC:LINE: key: message`` (the line of ``key`` in the spec's text)."""
    from unlearn_tasks.settings import parse_settings

    return parse_settings(spec.text, spec.path).error(key, message)


def validate_spec(spec: Spec) -> None:
    """Raise :class:`SpecError` (one line naming the spec's key and the fix) for what would fail only after the
    trials trained."""
    ev = spec.evaluation
    if not ev.tasks:
        return
    where = spec.path
    _known_tasks(spec)
    from unlearn_tasks.metadata import benchmark_keys, check_metadata_keys

    try:
        check_metadata_keys(ev.metadata, benchmark_keys(), f"{where}: evaluation.metadata")
    except ValueError as e:
        raise _error(spec, "evaluation.metadata", str(e).removeprefix(f"{where}: evaluation.metadata").lstrip(": ")) from None
    references = ev.reference.values() if isinstance(ev.reference, dict) else [ev.reference] if ev.reference else []
    for reference in references:
        if not Path(str(reference)).expanduser().exists():
            raise _error(spec, "evaluation.reference", f"{reference} does not exist (the reference run's folder)")
    metrics = _declared_metrics(ev.tasks)
    baseline: dict[str, dict[str, float]] = {}
    if ev.baseline:
        baseline = _baseline(spec)
        for task, names in baseline.items():
            metrics.setdefault(task, set()).update(names)
    for key, found, compared in _named(spec):
        for ref in found:
            if compared and ev.baseline and ref.task not in baseline:
                raise _error(spec, key, f"the baseline {ev.baseline} holds no results of {ref.task} "
                                f"(it holds {', '.join(sorted(baseline)) or 'none'})")
            known = metrics.get(ref.task)
            if known is not None and ref.metric not in known:
                raise _error(spec, key, f"{ref.task} has no metric {ref.metric!r}; its metrics are "
                                f"{', '.join(sorted(known))}")


def check_results_names(spec: Spec, metrics: dict[str, dict[str, Any]]) -> None:
    """Every ``TASK/METRIC`` the spec names whose task is in ``metrics`` (the first finished trial's results) is a
    metric there: what :func:`validate_spec` could not know before any trial ran (our benchmarks' metrics depend
    on their options) stops the sweep after one trial, not after all of them."""
    for key, found, _ in _named(spec):
        for ref in found:
            known = metrics.get(ref.task)
            if isinstance(known, dict) and ref.metric not in known:
                raise _error(spec, key, f"{ref.task} has no metric {ref.metric!r}; its metrics are "
                                f"{', '.join(sorted(known))} (found when the first trial ended; fix the spec and "
                                "continue with --resume: the finished trial is kept)")


def _known_tasks(spec: Spec) -> None:
    from harness_ext.evaluate import unknown_tasks

    unknown = unknown_tasks(list(spec.evaluation.tasks))
    if unknown:
        raise _error(spec, "evaluation.tasks", f"unknown task(s) {', '.join(unknown)}; `lm-eval ls tasks` "
                        "lists them")


def _declared_metrics(tasks: list[str]) -> dict[str, set[str]]:
    """The metrics of the lm-eval tasks whose YAML lists them (``metric_list``); our benchmarks' metrics depend on
    their options and are known from a baseline's results."""
    from harness_ext.task_index import indexed

    index = indexed(tasks)
    out = {}
    for name in tasks:
        cfg = getattr(index.get(name), "cfg", None) or {}
        listed = cfg.get("metric_list")
        if "class" not in cfg and isinstance(listed, list) and listed and all(isinstance(m, dict) for m in listed):
            out[name] = {str(m.get("metric")) for m in listed}
    return out


def _baseline(spec: Spec) -> dict[str, dict[str, float]]:
    from unlearn_app.ci.runner import load_baseline

    try:
        return load_baseline(spec.evaluation.baseline)
    except Exception as e:  # noqa: BLE001  (any unreadable baseline is the spec's error, named with its key)
        raise _error(spec, "evaluation.baseline", str(e)) from None


def _named(spec: Spec) -> list[tuple[str, list[Ref], bool]]:
    """(key, the TASK/METRIC references under it, whether they are compared with the baseline)."""
    out: list[tuple[str, list[Ref], bool]] = [
        (f"evaluation.checks {c.text!r}", c.refs, _compares(c)) for c in spec.evaluation.checks]
    if spec.select:
        out.append((f"select {spec.select.text!r}", refs(spec.select.expression), False))
        out += [(f"select_if {c.text!r}", c.refs, _compares(c)) for c in spec.select.conditions]
    out += [(f"pareto.{axis} {rule.text!r}", refs(rule.expression), False) for axis, rule in spec.pareto.items()]
    stop: dict[str, Any] = spec.early_stop or {}
    if "/" in str(stop.get("metric", "")):
        task, metric = str(stop["metric"]).split("/", 1)
        out.append((f"early_stop.metric {stop['metric']!r}", [Ref(task, metric)], False))
    return out


def _compares(check: Check) -> bool:
    """Whether ``check`` reads ``baseline`` (the same metric in the baseline's results)."""
    return uses_baseline(check.left) or uses_baseline(check.right)
