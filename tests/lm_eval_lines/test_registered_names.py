"""Our names against lm-eval's built-in ones, on whichever lm-eval line is installed (the main suite: 0.4.13; the
lm-eval 0.5 stage of CI: 0.5.0.dev1). lm-eval skips a plugin name that collides with a built-in one silently
(registries) or lets the later one win with a log line (tasks), so a collision would change what users run.

What we register: task, group and tag names (our task folders, through the autoload hook and the ``lm_eval.tasks``
entry point), request types (methods added to lm-eval's ``LM``), and entry points in lm-eval's groups
(``lm_eval.models`` / ``filters`` / ``metrics`` / ``aggregations``: none today; any added to pyproject.toml is
checked here against the registry of its kind).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
#: lm-eval's entry-point groups (PRs #4013, #4014) -> the registry of that kind in ``lm_eval.api.registry``.
REGISTRY_OF_GROUP = {"lm_eval.models": "model_registry", "lm_eval.filters": "filter_registry",
                     "lm_eval.metrics": "metric_registry", "lm_eval.aggregations": "aggregation_registry"}


def _our_names() -> set[str]:
    from lm_eval.tasks import TaskManager

    from harness_ext.plugins import include_paths
    from harness_ext.task_index import index_of

    return set(index_of(TaskManager(include_path=include_paths(), include_defaults=False)))


def _without_our_hook(code: str) -> str:
    """What ``code`` prints, run in a fresh interpreter whose lm-eval is not given our task folders."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "UNLEARN_LMEVAL_AUTOLOAD": "0"})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()[-1]


def _their_names(names: set[str]) -> set[str]:
    """Which of ``names`` lm-eval's own task folders define: a YAML defining a name holds it as a word, so the folders
    of the YAMLs that hold one (read once, as bytes) are indexed by lm-eval alone (our start-up hook would add our
    folders to any index), in a fresh interpreter."""
    from harness_ext.task_index import lm_eval_tasks_root

    word = re.compile(rb"(?<![\w.-])(?:" + b"|".join(re.escape(n.encode()) for n in sorted(names, key=len, reverse=True))
                      + rb")(?![\w.-])")
    folders = sorted({str(p.parent) for p in lm_eval_tasks_root().glob("**/*.yaml") if word.search(p.read_bytes())})
    if not folders:
        return set()
    code = ("import json; from lm_eval.tasks import TaskManager; from harness_ext.task_index import index_of; "
            f"print(json.dumps(sorted(index_of(TaskManager(include_path={folders!r}, include_defaults=False)))))")
    return set(json.loads(_without_our_hook(code))) & names


def test_our_task_names_are_not_lm_eval_task_names():
    ours = _our_names()
    assert {"tofu_forget10", "tofu_forget01_leak", "tofu_mcqa", "muse_news_knowmem"} <= ours
    # the check finds a clash: lm-eval's own boolq, looked for beside ours
    assert _their_names(ours | {"boolq"}) == {"boolq"}, "lm-eval defines some of our names (or no longer boolq)"


def test_our_request_types_are_not_lm_eval_methods_or_output_types():
    from harness_ext.request_types import REQUEST_TYPES

    # a fresh interpreter without our start-up hook: lm-eval's own LM, backends and output types
    code = ("import json, typing, lm_eval.api.model as m, lm_eval.models.huggingface as h\n"
            "from lm_eval.api.registry import DEFAULT_METRIC_REGISTRY as d\n"
            "print(json.dumps(sorted(set(dir(m.LM)) | set(dir(h.HFLM)) | set(d))))")
    theirs = set(json.loads(_without_our_hook(code)))
    assert {"loglikelihood", "generate_until"} <= theirs  # the listing is lm-eval's
    assert not set(REQUEST_TYPES) & theirs, sorted(set(REQUEST_TYPES) & theirs)


def test_entry_points_in_lm_evals_groups_name_no_built_in():
    from importlib import import_module

    declared = PYPROJECT["project"].get("entry-points", {})
    # the tasks' entry point (PR #4015's proposal) names our task folder, a package lm-eval would scan
    assert declared["lm_eval.tasks"] == {"lm_eval_unlearning": "task_yaml"}
    assert Path(import_module("task_yaml").__file__).parent == REPO / "task_yaml"
    registry = import_module("lm_eval.api.registry")
    import_module("lm_eval.models")  # the built-in models' placeholders
    import_module("lm_eval.filters")
    import_module("lm_eval.api.metrics")
    for group, attribute in REGISTRY_OF_GROUP.items():
        built_in = set(getattr(registry, attribute).keys())
        assert built_in, attribute
        clash = set(declared.get(group, {})) & built_in
        assert not clash, f"{group}: {sorted(clash)} are lm-eval's built-in names (lm-eval would skip ours)"
    unknown = {g for g in declared if g.startswith("lm_eval.") and g not in {*REGISTRY_OF_GROUP, "lm_eval.tasks"}}
    assert not unknown, f"entry-point groups lm-eval does not read: {sorted(unknown)}"
