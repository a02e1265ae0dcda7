"""The method names are known without importing the method classes: :data:`unlearn_methods.registry.BUILT_IN` is
exactly the registered classes (so it cannot drift), and a name is checked with no torch or transformers imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from unlearn_methods import all_methods, check_method
from unlearn_methods.registry import BUILT_IN, METHODS, is_method, method_names, register

REPO = Path(__file__).resolve().parents[2]


def test_built_in_names_are_the_registered_classes_and_their_modules():
    registered = {name: cls.__module__ for name, cls in all_methods().items()}
    assert registered == BUILT_IN
    assert all(cls.name == name for name, cls in all_methods().items())


def test_a_name_is_checked_without_importing_a_method_class():
    code = ("import json, sys\nfrom unlearn_methods import check_method\ntry:\n    check_method('npo-x')\n"
            "except ValueError as e:\n    message = str(e)\n"
            "print(json.dumps([check_method('Retain-FT'), message, sorted({m.split('.')[0] for m in sys.modules} & "
            "{'torch', 'transformers', 'peft', 'datasets', 'accelerate'}), 'unlearn_methods.methods' in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    key, message, heavy, classes = json.loads(done.stdout.strip().splitlines()[-1])
    assert key == "retain_ft" and heavy == [] and classes is False
    assert message == f"Unknown method 'npo-x'; available: {', '.join(sorted(BUILT_IN))}."


def test_a_method_registered_at_run_time_is_known_by_name_too():
    class _Probe(all_methods()["ga"]):
        name = "probe_registry"

    assert not is_method("probe-registry")
    register(_Probe)
    try:
        assert is_method("Probe-Registry") and check_method("probe_registry") == "probe_registry"
        assert "probe_registry" in method_names() and method_names() == sorted(method_names())
    finally:
        METHODS.pop("probe_registry")
    with pytest.raises(ValueError, match=r"Unknown method 'probe_registry'; available: altpo, ceu, "):
        check_method("probe_registry")
