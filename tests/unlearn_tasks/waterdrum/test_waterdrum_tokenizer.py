"""WaterDrum tokenizers: the offline Llama-3 one from llama-models (skipped when absent), HF ones, errors."""

from __future__ import annotations

import builtins
import importlib.util

import pytest

from unlearn_tasks.waterdrum import tokenizer as tk

HAVE_LLAMA_MODELS = importlib.util.find_spec("llama_models") is not None and importlib.util.find_spec("tiktoken") is not None


@pytest.mark.skipif(not HAVE_LLAMA_MODELS, reason="llama-models / tiktoken not installed (extra [waterdrum])")
def test_offline_llama3_tokenizer() -> None:
    enc = tk.TiktokenLlama3Encoder()
    assert enc.vocab_size == 128000
    assert enc.encode("Hello world, this is a test of the tokenizer.") == [
        9906, 1917, 11, 420, 374, 264, 1296, 315, 279, 47058, 13
    ]
    assert enc.encode("Hello, world!") == [9906, 11, 1917, 0]
    assert enc.encode("a<|eot_id|>b") == [64, 128009, 65]  # literal special strings become special ids
    assert enc.decode(enc.encode("round trip")) == "round trip"


def test_missing_llama_models_says_how_to_install(monkeypatch) -> None:
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("llama_models"):
            raise ImportError("no llama_models")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    monkeypatch.setattr(tk, "_hf_tokenizer", lambda name, local_only: (_ for _ in ()).throw(OSError("offline")))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tk.load_tokenizer.cache_clear()
    try:
        with pytest.raises(tk.TokenizerUnavailable, match=r"lm-eval-unlearning\[waterdrum\]"):
            tk.load_tokenizer()
    finally:
        tk.load_tokenizer.cache_clear()


def test_hf_tokenizer_by_directory_and_object(tiny_model_dir) -> None:
    enc = tk.load_tokenizer(str(tiny_model_dir))
    assert isinstance(enc, tk.HFEncoder) and enc.vocab_size > 100
    ids = enc.encode("The author was born")
    assert ids and all(isinstance(i, int) for i in ids)
    assert tk.as_encoder(enc.tokenizer).encode("The author was born") == ids
    with pytest.raises(tk.TokenizerUnavailable):
        tk.load_tokenizer(str(tiny_model_dir / "missing"))
    with pytest.raises(TypeError):
        tk.as_encoder(42)


_CACHE_ENV = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HUGGINGFACE_CO_STAGING")


@pytest.mark.parametrize("env", [
    {}, {"XDG_CACHE_HOME": "/x/cache"}, {"HF_HOME": "~/hf"}, {"HF_HOME": "/h", "HUGGINGFACE_HUB_CACHE": "/legacy"},
    {"HF_HOME": "/h", "HUGGINGFACE_HUB_CACHE": "/legacy", "HF_HUB_CACHE": "$HOME/new"},
])
def test_hub_cache_dir_is_huggingface_hubs(env, monkeypatch) -> None:
    """The folder checked before importing huggingface_hub is the one huggingface_hub itself reads (its constants,
    computed in a fresh interpreter under the same environment)."""
    import json
    import os
    import subprocess
    import sys

    for name in _CACHE_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    theirs = subprocess.run([sys.executable, "-c", "import huggingface_hub.constants as c, json; "
                             "print(json.dumps(c.HF_HUB_CACHE))"], capture_output=True, text=True, check=True,
                            env=dict(os.environ))
    assert tk._hub_cache_dir() == json.loads(theirs.stdout)


def test_hf_cache_check_reads_the_cache_and_skips_huggingface_hub_without_the_repo(tmp_path, monkeypatch) -> None:
    import sys

    for name in _CACHE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    real_import = builtins.__import__
    imported = []

    def spy(name, *args, **kwargs):
        imported.append(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", spy)
    assert tk._in_hf_cache("org/absent") is False
    assert "huggingface_hub" not in imported  # no folder for the repository: decided without the import
    snapshot = tmp_path / "models--org--present" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (tmp_path / "models--org--present" / "refs").mkdir()
    (tmp_path / "models--org--present" / "refs" / "main").write_text("abc123")
    assert tk._in_hf_cache("org/present") is False  # the folder without a tokenizer file: huggingface_hub says no
    assert "huggingface_hub" in imported or "huggingface_hub" in sys.modules
    (snapshot / "tokenizer.json").write_text("{}")
    assert tk._in_hf_cache("org/present") is True


@pytest.mark.skipif(not HAVE_LLAMA_MODELS, reason="llama-models / tiktoken not installed (extra [waterdrum])")
def test_ranks_read_in_one_pass_equal_llama_models_own(tmp_path) -> None:
    from pathlib import Path

    import llama_models.llama3.tokenizer as module
    from llama_models.tokenizer_utils import load_bpe_file

    model = Path(module.__file__).parent / "tokenizer.model"
    ours, theirs = tk.read_ranks(model, fallback=load_bpe_file), load_bpe_file(model)
    assert len(ours) == 128000 and list(ours.items()) == list(theirs.items())  # same tokens, ranks and order
    assert tk.TiktokenLlama3Encoder().encode("Hello, world!") == [9906, 11, 1917, 0]
    assert module.load_bpe_file is load_bpe_file  # llama-models' reader is put back after the tokenizer is built
    odd = tmp_path / "odd.model"
    odd.write_text("IQ== 0\nIg== 1\nnot-a-pair\n")
    assert tk.read_ranks(odd, fallback=lambda path: {b"fallback": 0}) == {b"fallback": 0}
