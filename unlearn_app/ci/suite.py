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

Every error names the file, the line, the key and what to write instead (:mod:`unlearn_tasks.settings`, the one
reader of settings files: duplicate keys, non-UTF-8 bytes, alias bombs and deep nesting are refused there).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from unlearn_app.ci.checks import Check, CheckSyntaxError, parse_check
from unlearn_tasks.settings import Invalid, SettingsError, keys_help, parse_settings, read_section, read_settings
from unlearn_tasks.settings import param as key

BACKENDS = ("hf", "vllm")
#: Alias of :class:`unlearn_tasks.settings.SettingsError` (every settings file's error).
SuiteError = SettingsError


@dataclass
class Suite:
    """A suite file, declared once: each field a key of the file (its type, range and help: the messages and the
    docs' table come from here)."""

    tasks: list[str] = key([], "list of lm-eval task or group names (or one comma-separated text)",
                           file_type=list[str] | str, required=True)
    checks: list[Check] = key([], "list of checks such as 'tofu_forget10/forget_quality >= 0.05'",
                              file_type=list[str], required=True)
    model_args: dict[str, Any] = key({}, "mapping of extra model arguments (dtype, ...)")
    backend: str = key("hf", "hf or vllm", choices=BACKENDS)
    metadata: dict[str, Any] = key({}, "mapping of task options (lm_eval --metadata)")
    reference: str | dict[str, str] | None = key(None, "reference run folder, or {forget10: DIR, ...}")
    baseline: str | None = key(None, "results of the model before unlearning (lm-eval output folder or an "
                               "`unlearn ci` folder)")
    limit: int | None = key(None, "number of documents per task (smoke tests only)", gt=0)
    batch_size: int | str = key(16, "lm-eval batch size (a number, auto or auto:N)")
    path: str = "<suite>"  # the file, for messages
    lines: dict[str, int] = field(default_factory=dict)  # the line of each key (messages)

    def task_metadata(self) -> dict[str, Any]:
        """Task options for lm-eval: ``metadata`` with ``reference`` added."""
        meta = dict(self.metadata)
        if self.reference is not None:
            meta["reference"] = self.reference
        return meta


KEYS = keys_help(Suite)


def load_suite(path: str | Path) -> Suite:
    """Read and validate the syntax of a suite file (metric names are checked later, against the tasks)."""
    return _suite(read_settings(path, "suite file"))


def parse_suite(text: str | bytes, where: str = "<suite>") -> Suite:
    return _suite(parse_settings(text, where))


def _suite(doc) -> Suite:
    """The suite of a read settings file; every error is ``FILE:LINE: key: what to fix``."""
    if not isinstance(doc.data, dict):
        raise SettingsError(doc.where, "expected a YAML mapping with at least 'tasks' and 'checks'")
    try:
        suite = read_section(Suite, doc.data)
        if isinstance(suite.tasks, str):
            suite.tasks = [t.strip() for t in suite.tasks.split(",") if t.strip()]
        if not suite.tasks:
            raise Invalid("tasks", "give a list of lm-eval task names, e.g. tasks: [tofu_forget10]")
        if not suite.checks:
            raise Invalid("checks", "the list is empty, so the suite would pass whatever the numbers; give at least "
                          "one check (- tofu_forget10/forget_quality >= 0.05)")
    except Invalid as e:
        raise doc.located(e) from None
    checks = []
    for i, item in enumerate(suite.checks):
        line = doc.line(f"checks.{i}")
        try:
            checks.append(parse_check(item, line))
        except CheckSyntaxError as e:
            raise SettingsError(doc.where, f"bad check: {e}", line, "checks") from None
    suite.checks, suite.path, suite.lines = checks, doc.where, doc.lines
    return suite


def validate_checks(suite: Suite, metrics: dict[str, list[str]], groups: dict[str, list[str]] | None = None,
                    what: str = "the suite runs") -> None:
    """Every check's ``TASK/METRIC`` must be a task of the suite and a metric that task reports.

    ``metrics`` maps each leaf task to its metric names (from lm-eval's task objects); ``groups`` maps group names
    to their tasks.
    """
    groups = groups or {}
    for check in suite.checks:
        for ref in check.refs:
            if ref.task in groups and ref.task not in metrics:
                raise _bad(suite, check, f"{ref.task} is a group; name one of its tasks: {', '.join(groups[ref.task])}")
            if ref.task not in metrics:
                raise _bad(suite, check, f"unknown task {ref.task!r}; {what} {', '.join(sorted(metrics))} "
                                         "(add it to tasks: or fix the name)")
            if ref.metric not in metrics[ref.task]:
                raise _bad(suite, check, f"{ref.task} has no metric {ref.metric!r}; its metrics are "
                                         f"{', '.join(metrics[ref.task])}")


def _bad(suite: Suite, check: Check, message: str) -> SettingsError:
    return SettingsError(suite.path, f"{check.text!r}: {message}", check.line, "checks")
