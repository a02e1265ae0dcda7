"""Quantization attack: weights move within the int format's rounding bound; the checkpoint runs in lm-eval."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from unlearn_methods.attacks.quantize import fake_quantize, quantize_checkpoint


def test_fake_quantize_by_hand():
    w = torch.tensor([[1.0, -0.5, 0.25, 0.1], [0.0, 2.0, -2.0, 0.3]])
    deq, scale = fake_quantize(w, 8, group_size=2)
    # symmetric int8: scale = max|w| / 127.5 per group of 2 columns (torchao: (max - min) / (qmax - qmin))
    expect_scale = torch.tensor([[1.0, 0.25], [2.0, 2.0]]) / 127.5
    assert torch.allclose(scale, expect_scale, rtol=1e-5)
    expect = torch.round(w / expect_scale.repeat_interleave(2, -1)).clamp(-128, 127) * expect_scale.repeat_interleave(2, -1)
    assert torch.allclose(deq, expect, atol=1e-7)
    deq4, scale4 = fake_quantize(w, 4, group_size=None)  # 4 columns < 128: one group per row
    assert scale4.shape == (2, 1) and len(torch.unique(torch.round(deq4[1] / scale4[1]))) <= 16


def test_group_size_must_divide_columns():
    with pytest.raises(ValueError, match="does not divide a layer's 4 input columns"):
        fake_quantize(torch.ones(2, 4), 4, group_size=3)


@pytest.mark.parametrize("bits", [8, 4])
def test_quantized_checkpoint_moves_weights_within_the_error_bound(bits, tmp_path, tiny_model_dir):
    report = quantize_checkpoint(tiny_model_dir, tmp_path / "q", bits=bits, group_size=16)
    assert report.layers > 0 and report.max_error_over_half_scale <= 1.0 + 1e-4
    saved = json.loads((tmp_path / "q" / "quantization.json").read_text())
    assert saved["bits"] == bits and saved["group_size"] == 16
    before = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    after = AutoModelForCausalLM.from_pretrained(tmp_path / "q")
    w0 = before.model.layers[0].mlp.down_proj.weight
    w1 = after.model.layers[0].mlp.down_proj.weight
    assert not torch.equal(w0, w1)
    groups = w0.reshape(w0.shape[0], -1, 16)
    bound = groups.abs().amax(-1, keepdim=True) / (2 ** bits - 1)  # half a quantization step
    assert ((w1 - w0).reshape_as(groups).abs() <= bound + 1e-6).all()
    assert (w0 - w1).abs().max() > 0
    levels = torch.unique(torch.round(w1.reshape_as(groups) / (2 * bound))).numel()
    assert levels <= 2 ** bits
    assert torch.equal(before.lm_head.weight, after.lm_head.weight)  # the output head is left as it is


@pytest.mark.slow
def test_quantized_checkpoint_runs_in_lm_eval(tmp_path, tiny_model_dir, demo_data_dir):
    from harness_ext.evaluate import run_lm_eval

    quantize_checkpoint(tiny_model_dir, tmp_path / "q", bits=8)
    task, meta = "tofu_forget01_likelihood", {"data_dir": str(demo_data_dir)}
    quantized = run_lm_eval(tmp_path / "q", [task], tmp_path / "eval", limit=4, metadata=meta, batch_size=4)
    original = run_lm_eval(tiny_model_dir, [task], tmp_path / "eval0", limit=4, metadata=meta, batch_size=4)
    q, o = quantized["results"][task], original["results"][task]
    probs = [k for k in o if k.endswith("_prob,none")]
    assert len(probs) == 4, o
    for key in probs:  # the quantized checkpoint is scored, and int8 rounding barely moves a probability
        assert 0.0 < q[key] < 1.0 and q[key] != o[key], key
        assert q[key] == pytest.approx(o[key], rel=0.05), key
