"""Start-up cost of the command line: `unlearn --help` and `unlearn verify` import only what they need (`verify` no
other command's module), and the compiled WaterDrum kernel's machine code is cached on disk and loaded without numba
(checked by modules loaded and cache files, not by timing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "lm_eval", "datasets", "numba", "tiktoken", "sklearn", "huggingface_hub")


def _python(code: str, tmp_path: Path, **env: str) -> dict:
    full_env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HOME": str(tmp_path / "hf_home"), **env}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=full_env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


LOADED = f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))"


def test_help_imports_no_heavy_package(tmp_path):
    code = ("import contextlib, io, json, sys\nfrom unlearn_app.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n    main(['--help'])\n"
            + LOADED)
    assert _python(code, tmp_path) == []


def test_run_with_a_bad_config_file_fails_before_importing_the_training_stack(tmp_path):
    """A wrong --config path or a bad option in the file is a one-line error within a second: torch, transformers
    and the Trainer are imported only once the config has been read and checked."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("lr: 1e-5\nepochz: 3\n")
    for config in (tmp_path / "missing.yaml", bad):
        code = ("import contextlib, io, json, sys\nfrom unlearn_app.cli import main\nerr = io.StringIO()\n"
                f"with contextlib.redirect_stderr(err):\n    rc = main(['run', '--config', {str(config)!r}, '--out', "
                f"{str(tmp_path / 'out')!r}])\n"
                "print(json.dumps([rc, err.getvalue().strip(), sorted({m.split('.')[0] for m in sys.modules} & "
                f"set({HEAVY!r}))]))")
        rc, message, loaded = _python(code, tmp_path)
        assert rc == 2 and str(config.name) in message and "\n" not in message
        assert "torch" not in loaded and "transformers" not in loaded


def test_verify_with_the_default_tokenizer_imports_no_torch(tmp_path):
    pytest.importorskip("llama_models")
    pytest.importorskip("tiktoken")
    data = tmp_path / "texts.jsonl"
    data.write_text(json.dumps({"text": "The author born in Oslo writes mystery novels."}) + "\n")
    code = ("import contextlib, io, json, sys\nfrom unlearn_app.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main(['verify', '--ids', '0-2', '--in', {str(data)!r}]) == 0\n"
            + LOADED[:-2] + " + sorted(m for m in sys.modules if m.startswith('unlearn_app.commands.'))))")
    loaded = _python(code, tmp_path)
    # only the module of `verify` is imported and builds its parsers (every command's took 0.15 s of CPU), with the
    # table of the help texts' example commands
    assert [m for m in loaded if m.startswith("unlearn_app.")] == ["unlearn_app.commands._examples",
                                                                  "unlearn_app.commands.waterdrum"]
    assert "tiktoken" in loaded and "torch" not in loaded and "transformers" not in loaded and "lm_eval" not in loaded
    # scikit-learn (the ulira parser's module) and datasets (the JSON-lines reader's module) took seconds each
    assert "sklearn" not in loaded and "datasets" not in loaded
    assert "huggingface_hub" not in loaded  # an empty HF cache (HF_HOME here) is seen without it


def test_compiled_kernel_is_cached_on_disk_and_loaded_without_numba(tmp_path, monkeypatch):
    pytest.importorskip("numba")
    from unlearn_tasks.waterdrum import kernel_cache

    cache = tmp_path / "numba_cache"
    code = ("import json, sys, numpy as np\nfrom unlearn_tasks.waterdrum import kernel_cache\n"
            "out = kernel_cache.positions(np.array([0, 1]), np.array([5, 9]), np.array([0, 2, 3]), np.array([3, 7, 11]), 1000)\n"
            "print(json.dumps({'numba': 'numba' in sys.modules, 'scipy': 'scipy' in sys.modules, 'out': out.tolist()}))")
    first = _python(code, tmp_path, NUMBA_CACHE_DIR=str(cache))
    files = list(cache.rglob("mt19937-kernel-*.bin"))
    assert first["numba"] and len(files) == 1  # built by numba, and the machine code written to the cache
    expected = [[int(np.random.RandomState([owner, prev]).permutation(1000)[t]) for prev, t in ((5, 3), (5, 7), (9, 11))]
                for owner in (0, 1)]
    assert first["out"] == expected
    second = _python(code, tmp_path, NUMBA_CACHE_DIR=str(cache))
    assert not second["numba"] and not second["scipy"] and second["out"] == expected  # loaded, numba never imported
    # a cache file built from other source, numba, llvmlite or CPU is never used: it carries its key
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(cache))
    key = kernel_cache._key()
    assert kernel_cache._read(key) is not None
    header, _, obj = files[0].read_bytes().partition(b"\n")
    meta = json.loads(header)
    meta["key"]["cpu"] = "another-cpu"
    files[0].write_bytes(json.dumps(meta).encode() + b"\n" + obj)
    assert kernel_cache._read(key) is None
    files[0].write_bytes(header + b"\n" + obj[:-1])  # cut short
    assert kernel_cache._read(key) is None
