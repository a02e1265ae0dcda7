"""Quantization attack (Zhang et al., "Catastrophic Failure of LLM Unlearning via Quantization", ICLR 2025).

Every ``nn.Linear`` weight except the output head is quantized to symmetric int8/int4 per group of ``group_size``
input columns with torchao's affine quantization primitives, then dequantized back to the checkpoint's dtype.
The written checkpoint is a plain float one: it gives the same numbers as the quantized model, loads in
``lm_eval --model hf`` without torchao, and runs on CPU (torchao's packed int4 layouts need GPU kernels).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from unlearn_methods import checkpoint_folder

#: Default int4 group size (torchao's); int8 defaults to one group per output channel (whole rows).
INT4_GROUP_SIZE = 128


@dataclass
class QuantizeReport:
    bits: int
    group_size: int | None  # None: per output channel for int8, 128 (or the whole row) for int4
    layers: int
    parameters: int
    max_abs_error: float
    max_error_over_half_scale: float  # <= 1 (+ float rounding) by construction of round-to-nearest

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"


def fake_quantize(weight: torch.Tensor, bits: int, group_size: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-group quantize-then-dequantize of a 2-D weight; returns (dequantized, per-group scale)."""
    from torchao.quantization.quant_primitives import (
        MappingType,
        choose_qparams_affine,
        dequantize_affine,
        quantize_affine,
    )

    if bits not in (4, 8):
        raise ValueError(f"--bits must be 8 or 4, got {bits}")
    cols = weight.shape[-1]
    if group_size is None:
        group = INT4_GROUP_SIZE if bits == 4 and cols % INT4_GROUP_SIZE == 0 else cols
    else:
        group = group_size
    if cols % group:
        raise ValueError(f"--group-size {group} does not divide a layer's {cols} input columns; pick a divisor "
                         f"of {cols} (e.g. 32, 64) or leave it out")
    qmin, qmax = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    block = (1, group)
    w = weight.detach().float()
    scale, zero = choose_qparams_affine(w, MappingType.SYMMETRIC, block, torch.int8, quant_min=qmin, quant_max=qmax)
    q = quantize_affine(w, block, scale, zero, torch.int8, qmin, qmax)
    deq = dequantize_affine(q, block, scale, zero, torch.int8, qmin, qmax, output_dtype=torch.float32)
    return deq.to(weight.dtype), scale.reshape(w.shape[0], cols // group)


def quantize_checkpoint(model_dir: str | Path, out: str | Path, bits: int, group_size: int | None = None) -> QuantizeReport:
    """Quantize ``model_dir``'s linear layers (not the output head) and save the dequantized checkpoint to ``out``."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="auto")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    head = model.get_output_embeddings()
    layers = params = 0
    max_err = max_ratio = 0.0
    with torch.no_grad():
        for module in model.modules():
            if not isinstance(module, torch.nn.Linear) or module is head:
                continue
            deq, scale = fake_quantize(module.weight, bits, group_size)
            err = (deq.float() - module.weight.float()).abs()
            half = (scale.float() / 2).repeat_interleave(err.shape[-1] // scale.shape[-1], dim=-1).clamp_min(1e-12)
            max_err = max(max_err, err.max().item())
            max_ratio = max(max_ratio, (err / half).max().item())
            module.weight.copy_(deq)
            layers += 1
            params += module.weight.numel()
    if not layers:
        raise ValueError(f"{model_dir} has no linear layers to quantize")
    report = QuantizeReport(bits, group_size, layers, params, max_err, max_ratio)
    with checkpoint_folder.writing(out) as folder:  # ``out`` appears when complete
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        (folder / "quantization.json").write_text(report.to_json())
    return report
