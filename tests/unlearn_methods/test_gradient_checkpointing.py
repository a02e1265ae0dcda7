"""``--gradient-checkpointing``: the layers' activations are recomputed during backward (each decoder layer runs
twice per training forward: its MLP is counted), and the run ends in the weights and losses of a run without it, full and LoRA."""

from __future__ import annotations

import pytest
import torch
from transformers.models.llama.modeling_llama import LlamaMLP

from fixtures.weights import logged_losses, update_difference
from unlearn_methods.config import load_run_config
from unlearn_methods.training import train


def _cfg(tmp_path, model_dir, data_dir, name, lora, **kw):
    return load_run_config(None, method="npo", model=str(model_dir), out=str(tmp_path / name), data_dir=str(data_dir),
                           forget="forget01", epochs=1, batch_size=4, lr=1e-2 if lora else 1e-3, lora=lora,
                           progress=False, seed=3, max_length=64, **kw)


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_the_same_run_with_the_activations_recomputed(tiny_model_dir, demo_data_dir, tmp_path, monkeypatch, lora):
    calls = {"grad": 0}
    original = LlamaMLP.forward  # inside each decoder layer (whose own forward the checkpointing wraps)

    def counting(self, *args, **kwargs):
        calls["grad"] += torch.is_grad_enabled()
        return original(self, *args, **kwargs)

    monkeypatch.setattr(LlamaMLP, "forward", counting)
    plain = train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "plain", lora)).out
    without = calls["grad"]
    calls["grad"] = 0
    recomputed = train(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "recomputed", lora,
                            gradient_checkpointing=True)).out
    assert without > 0 and calls["grad"] == 2 * without  # every layer's forward with gradients ran again in backward
    diff, update = update_difference(tiny_model_dir, plain, recomputed)
    assert update > 0 and diff <= 1e-5
    assert logged_losses(recomputed) == pytest.approx(logged_losses(plain), rel=1e-5)
