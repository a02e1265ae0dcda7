"""``run_lm_eval``'s default device: the GPU when torch sees one (the one a process is pinned to by
CUDA_VISIBLE_DEVICES), else the CPU; an explicit device and other backends are left alone."""

import pytest
import torch

import harness_ext.evaluate as evaluate


@pytest.fixture
def seen(monkeypatch):
    calls = []
    monkeypatch.setattr(evaluate, "evaluate_lm", lambda *a, **kw: calls.append(kw["device"]) or {})
    return calls


@pytest.mark.parametrize("cuda, backend, device, expected", [
    (True, "hf", None, "cuda"),
    (False, "hf", None, "cpu"),
    (True, "hf-multimodal", None, "cuda"),
    (True, "hf", "cpu", "cpu"),  # asked for
    (False, "hf", "cuda:1", "cuda:1"),
    (True, "vllm", None, None),  # vLLM places itself
])
def test_default_device_follows_the_visible_gpu(monkeypatch, seen, tmp_path, cuda, backend, device, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    evaluate.run_lm_eval("m", ["t"], tmp_path, backend=backend, device=device)
    assert seen == [expected]
