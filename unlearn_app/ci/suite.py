"""The CI suite file: which lm-eval tasks to run, how, and the checks the results must pass.

Example (``suite.yaml`` in the user's repository)::

    model_args: {dtype: bfloat16}
    backend: hf                 # or vllm
    tasks: [tofu_forget10, tofu_formats]
    metadata: {data_dir: data/tofu}             # task options (--metadata of lm_eval)
    reference: {forget10: runs/retain90/}       # gold run for Forget Quality / PrivLeak
    baseline: runs/target/                      # the model before unlearning
    checks:
      - tofu_forget10/forget_quality >= 0.05
      - tofu_forget10/model_utility >= 0.95 * baseline

Every error names the file, the line and what to write instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from unlearn_app.ci.checks import Check, CheckSyntaxError, parse_check

BACKENDS = ("hf", "vllm")
KEYS = {
    "tasks": "list of lm-eval task or group names",
    "checks": "list of checks such as 'tofu_forget10/forget_quality >= 0.05'",
    "model_args": "mapping of extra model arguments (dtype, ...)",
    "backend": "hf or vllm",
    "metadata": "mapping of task options (lm_eval --metadata)",
    "reference": "reference run folder, or {forget10: DIR, ...}",
    "baseline": "results of the model before unlearning (lm-eval output folder or an `unlearn ci` folder)",
    "limit": "number of documents per task (smoke tests only)",
    "batch_size": "lm-eval batch size",
}


#: Most values (scalars, list items, mapping entries) a suite may hold once YAML aliases are expanded.
MAX_VALUES = 10_000


class SuiteError(ValueError):
    """A suite file that cannot be used; the message names the file, the line and the fix."""


@dataclass
class Suite:
    tasks: list[str]
    checks: list[Check]
    path: str = "<suite>"
    model_args: dict[str, Any] = field(default_factory=dict)
    backend: str = "hf"
    metadata: dict[str, Any] = field(default_factory=dict)
    reference: str | dict[str, str] | None = None
    baseline: str | None = None
    limit: int | None = None
    batch_size: int | str = 16

    def task_metadata(self) -> dict[str, Any]:
        """Task options for lm-eval: ``metadata`` with ``reference`` added."""
        meta = dict(self.metadata)
        if self.reference is not None:
            meta["reference"] = self.reference
        return meta


def _lines(text: str) -> tuple[dict[str, int], list[int]]:
    """Line numbers (1-based) of the top-level keys and of each item of ``checks``."""
    try:
        root = yaml.compose(text)
    except yaml.YAMLError:
        return {}, []
    keys: dict[str, int] = {}
    checks: list[int] = []
    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            keys[str(key.value)] = key.start_mark.line + 1
            if key.value == "checks" and isinstance(value, yaml.SequenceNode):
                checks = [item.start_mark.line + 1 for item in value.value]
    return keys, checks


def load_suite(path: str | Path) -> Suite:
    """Read and validate the syntax of a suite file (metric names are checked later, against the tasks)."""
    path = Path(path)
    if not path.is_file():
        raise SuiteError(f"suite file {path} does not exist")
    text = path.read_text(encoding="utf-8")
    return parse_suite(text, str(path))


def parse_suite(text: str, where: str = "<suite>") -> Suite:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" line {mark.line + 1}" if mark else ""
        raise SuiteError(f"{where}:{at} is not valid YAML ({getattr(e, 'problem', e)})") from None
    if not isinstance(data, dict):
        raise SuiteError(f"{where}: expected a YAML mapping with at least 'tasks' and 'checks'")
    if _too_many_values(data):
        raise SuiteError(f"{where}: holds more than {MAX_VALUES} values once its YAML aliases (*name) are expanded; "
                         "write the values out instead of nesting aliases")
    key_lines, check_lines = _lines(text)

    def err(key: str, message: str) -> SuiteError:
        line = key_lines.get(key)
        return SuiteError(f"{where}:{f' line {line}:' if line else ''} {key}: {message}")

    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise err(unknown[0], f"unknown key; the keys are {', '.join(KEYS)}")
    tasks = data.get("tasks")
    if isinstance(tasks, str):
        tasks = [t.strip() for t in tasks.split(",") if t.strip()]
    if not tasks or not isinstance(tasks, list) or not all(isinstance(t, str) for t in tasks):
        raise err("tasks", "give a list of lm-eval task names, e.g. tasks: [tofu_forget10]")
    raw_checks = data.get("checks")
    if not isinstance(raw_checks, list):
        raise err("checks", "give a list, one check per item (- tofu_forget10/forget_quality >= 0.05)")
    if not raw_checks:
        raise err("checks", "the list is empty, so the suite would pass whatever the numbers; give at least one check "
                  "(- tofu_forget10/forget_quality >= 0.05)")
    checks = []
    for i, item in enumerate(raw_checks):
        line = check_lines[i] if i < len(check_lines) else None
        try:
            checks.append(parse_check(item, line))
        except CheckSyntaxError as e:
            raise SuiteError(f"{where}:{f' line {line}:' if line else ''} bad check: {e}") from None
    for key in ("model_args", "metadata"):
        if not isinstance(data.get(key) or {}, dict):
            raise err(key, f"expected a mapping ({KEYS[key]})")
    backend = data.get("backend") or "hf"
    if backend not in BACKENDS:
        raise err("backend", f"{backend!r} is not one of {BACKENDS}")
    reference = data.get("reference")
    if reference is not None and not isinstance(reference, (str, dict)):
        raise err("reference", f"expected {KEYS['reference']}")
    baseline = data.get("baseline")
    if baseline is not None and not isinstance(baseline, str):
        raise err("baseline", f"expected a path: {KEYS['baseline']}")
    limit = data.get("limit")
    if limit is not None and (not isinstance(limit, int) or limit <= 0):
        raise err("limit", "expected a positive integer")
    return Suite(tasks=list(tasks), checks=checks, path=where, model_args=dict(data.get("model_args") or {}),
                 backend=backend, metadata=dict(data.get("metadata") or {}), reference=reference,
                 baseline=baseline, limit=limit, batch_size=data.get("batch_size") or 16)


def _too_many_values(data: Any) -> bool:
    """Whether ``data`` holds more than :data:`MAX_VALUES` values counted as expanded (each alias counted again),
    stopping as soon as the limit is passed, so an alias bomb costs nothing."""
    count, stack = 0, [data]
    while stack:
        item = stack.pop()
        count += 1
        if count > MAX_VALUES:
            return True
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return False


def validate_checks(suite: Suite, metrics: dict[str, list[str]], groups: dict[str, list[str]] | None = None,
                    what: str = "the suite runs") -> None:
    """Every check's ``TASK/METRIC`` must be a task of the suite and a metric that task reports.

    ``metrics`` maps each leaf task to its metric names (from lm-eval's task objects); ``groups`` maps group names
    to their tasks.
    """
    groups = groups or {}
    for check in suite.checks:
        where = f"{suite.path}:{f' line {check.line}:' if check.line else ''} check {check.text!r}"
        for ref in check.refs:
            if ref.task in groups and ref.task not in metrics:
                raise SuiteError(f"{where}: {ref.task} is a group; name one of its tasks: {', '.join(groups[ref.task])}")
            if ref.task not in metrics:
                raise SuiteError(f"{where}: unknown task {ref.task!r}; {what} {', '.join(sorted(metrics))} "
                                 "(add it to tasks: or fix the name)")
            if ref.metric not in metrics[ref.task]:
                raise SuiteError(f"{where}: {ref.task} has no metric {ref.metric!r}; its metrics are "
                                 f"{', '.join(metrics[ref.task])}")
