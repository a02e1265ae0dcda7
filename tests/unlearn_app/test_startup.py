"""Start-up cost of the command line: `unlearn --help` and `unlearn verify` import only what they need, and the
compiled WaterDrum kernel is cached on disk (checked by modules loaded and cache hits, not by timing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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


def test_verify_with_the_default_tokenizer_imports_no_torch(tmp_path):
    pytest.importorskip("llama_models")
    pytest.importorskip("tiktoken")
    data = tmp_path / "texts.jsonl"
    data.write_text(json.dumps({"text": "The author born in Oslo writes mystery novels."}) + "\n")
    code = ("import contextlib, io, json, sys\nfrom unlearn_app.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    assert main(['verify', '--ids', '0-2', '--in', {str(data)!r}]) == 0\n"
            + LOADED)
    loaded = _python(code, tmp_path)
    assert "tiktoken" in loaded and "torch" not in loaded and "transformers" not in loaded and "lm_eval" not in loaded
    # scikit-learn (the ulira parser's module) and datasets (the JSON-lines reader's module) took seconds each
    assert "sklearn" not in loaded and "datasets" not in loaded
    assert "huggingface_hub" not in loaded  # an empty HF cache (HF_HOME here) is seen without it


def test_compiled_kernel_is_cached_on_disk(tmp_path):
    pytest.importorskip("numba")
    cache = tmp_path / "numba_cache"
    code = ("import json, numpy as np\nfrom unlearn_tasks.waterdrum import mt19937\n"
            "out = mt19937.positions(np.array([0, 1]), np.array([5, 9]), np.array([0, 2, 3]), np.array([3, 7, 11]), 1000)\n"
            "s = mt19937._positions.stats\nprint(json.dumps({'hits': sum(s.cache_hits.values()), "
            "'misses': sum(s.cache_misses.values()), 'out': out.tolist()}))")
    first = _python(code, tmp_path, NUMBA_CACHE_DIR=str(cache))
    assert first["misses"] >= 1 and list(cache.rglob("*.nbi"))  # compiled, and the index written to the cache
    second = _python(code, tmp_path, NUMBA_CACHE_DIR=str(cache))
    assert second["hits"] >= 1 and second["misses"] == 0 and second["out"] == first["out"]  # loaded, not compiled
