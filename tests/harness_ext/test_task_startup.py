"""What our tasks add to lm-eval's start-up: building one and importing every module our task YAMLs name imports
no package beyond those lm-eval imports before it builds tasks (checked by the modules loaded, not by timing), and
the patches of lm-eval's ``hf`` backends and evaluator are still made when lm-eval imports them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from harness_ext import tasks_dir

REPO = Path(__file__).resolve().parents[2]
#: Imported by scoring and aggregation, never by building a task (each took 0.5-1 s of a start-up).
LATER = ("torch", "transformers", "sklearn", "scipy", "rouge_score", "nltk")

CODE = """import importlib, json, sys
import lm_eval.evaluator, lm_eval.api.task  # what an lm-eval run has imported when it builds its tasks
top = lambda: {{m.split('.')[0] for m in sys.modules}}
before = top()
from harness_ext.task_index import task_manager
tasks = task_manager(['tofu_forget10'], {{'data_dir': {data!r}}}).load(['tofu_forget10'])['tasks']
for name in {modules!r}:
    importlib.import_module(name)
added = sorted(top() - before)
from lm_eval.models.huggingface import HFLM
from lm_eval.models.hf_vlms import HFMultimodalLM
patched = [f.__module__ for f in (HFLM._model_generate, HFLM.generate_until, HFMultimodalLM.generate_until)]
patched.append(getattr(HFLM.__init__, '_unlearn_patched', False))  # the start-up hook's (functools.wraps)
print(json.dumps({{'added': added, 'documents': len(tasks['tofu_forget10'].eval_docs), 'patched': patched,
                  'git': lm_eval.evaluator.get_git_commit_hash.__module__}}))
"""


def _yaml_modules() -> list[str]:
    """Every module a ``!function`` of our task YAMLs (and their ``include`` templates) names."""
    found = set()
    for path in tasks_dir().rglob("*"):
        if path.is_file() and path.suffix != ".md":
            found.update(m.rsplit(".", 1)[0] for m in re.findall(r"!function\s+([\w.]+)", path.read_text()))
    return sorted(found)


def test_building_our_tasks_imports_nothing_lm_eval_does_not(demo_data_dir, tmp_path):
    modules = _yaml_modules()
    assert "unlearn_tasks.tofu.task" in modules and len(modules) > 10
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", CODE.format(data=str(demo_data_dir), modules=modules)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["documents"] > 0  # the task was built, its documents read
    assert set(out["added"]) <= {"unlearn_tasks", "harness_ext"}, out["added"]
    assert not set(out["added"]) & set(LATER)
    # the patches that used to be made while a task was built are made when lm-eval imports its backends
    assert out["patched"] == ["harness_ext.generation", "harness_ext.generation", "harness_ext.multimodal", True]
    assert out["git"] == "harness_ext.lm_eval_patches"
