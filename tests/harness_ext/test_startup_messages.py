"""While `lm_eval` starts, the plugin says what it is doing (harness_ext.startup): that lm-eval's evaluator (torch,
transformers) loads, that the task index is built and how long it took, and which of our tasks loads its
documents. The bare `lm_eval` run of tests/unlearn_app/test_cli.py checks the order of the lines in a real run."""

from __future__ import annotations

import logging
import re

import pytest

from harness_ext import autoload
from harness_ext.startup import LOGGER


@pytest.fixture
def said():
    """The messages logged on the start-up logger (a handler of its own: lm-eval's CLI stops propagation)."""
    messages: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    logger, handler = logging.getLogger(LOGGER), Keep()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield messages
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_the_task_index_says_what_it_indexes_and_how_long_it_took(said):
    from lm_eval.tasks import TaskManager

    from harness_ext.plugins import include_paths

    manager = TaskManager(include_defaults=False)
    folders = len(include_paths())
    assert said[0] == f"Indexing the tasks of {folders} folder(s) (lm-eval-unlearning's, --include_path)"
    assert re.fullmatch(rf"Indexed {len(manager.task_index)} tasks, groups and tags in \d+\.\d s", said[1])
    assert len(manager.task_index) > 50 and len(said) == 2


def test_our_task_says_it_loads_its_documents(said, demo_data_dir):
    from lm_eval.tasks import TaskManager

    manager = TaskManager(include_defaults=False, metadata={"data_dir": str(demo_data_dir), "pretrained": "m"})
    said.clear()
    manager.load(["tofu_forget01_rouge"])
    assert said == ["tofu_forget01_rouge: loading its documents"]


def test_the_start_up_hook_announces_lm_evals_evaluator_unless_switched_off(monkeypatch):
    import lm_eval

    finder = autoload._PostImportFinder()
    spec = finder.find_spec("lm_eval.evaluator", lm_eval.__path__)
    assert spec.loader._announce == "Loading torch, transformers and lm-eval's evaluator"
    monkeypatch.setenv(autoload.ENV_SWITCH, "0")
    spec = finder.find_spec("lm_eval.evaluator", lm_eval.__path__)
    assert spec is None or spec.loader._announce is None
    assert finder.find_spec("json", None) is None  # other modules: not wrapped
