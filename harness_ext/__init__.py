"""Glue between lm-eval, the benchmarks and the user: task registration, the `unlearn` command line,
reference logs, reports and plots."""

from pathlib import Path

TASKS_DIR = Path(__file__).resolve().parent.parent / "task_yaml"


def tasks_dir() -> Path:
    """The folder holding this package's lm-eval task YAMLs (for ``--include_path`` or ``TaskManager``)."""
    return TASKS_DIR
