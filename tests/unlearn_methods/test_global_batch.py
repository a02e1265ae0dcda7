"""A step is normalised over its global batch: the means divide by the counts the trainer gathered over processes and
gradient-accumulation micro-batches (:data:`unlearn_methods.losses.NORM_KEY`), filler rows weigh 0
(:data:`unlearn_methods.losses.WEIGHT_KEY`); so a step split into micro-batches is the step taken whole. The
multi-process runs: test_multiprocess_training.py."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from fixtures.weights import assert_same_losses, logged_losses
from unlearn_methods.config import load_run_config
from unlearn_methods.losses import NORM_KEY, WEIGHT_KEY, batch_mean, mean_nll
from unlearn_methods.training import train


def _batch(labels: list[list[int]], **extra) -> dict:
    labels = torch.tensor(labels)
    return {"input_ids": labels.clamp_min(0), "attention_mask": torch.ones_like(labels), "labels": labels, **extra}


def test_a_mean_divides_by_its_share_of_the_global_count():
    logits = torch.zeros(2, 3, 4)  # uniform: every answer token has NLL log 4
    batch = _batch([[-100, 1, 2], [-100, 3, -100]])  # 3 answer tokens here
    assert float(mean_nll(logits, batch["labels"], batch)) == pytest.approx(torch.log(torch.tensor(4.0)).item())
    # 3 tokens of a step whose 2 processes hold 10 answer tokens: this process's share of the count is 10 / 2
    batch[NORM_KEY] = {"tokens": torch.tensor(5.0)}
    assert float(mean_nll(logits, batch["labels"], batch)) == pytest.approx(3 * torch.log(torch.tensor(4.0)).item() / 5)


def test_filler_rows_weigh_nothing():
    values = torch.tensor([1.0, 3.0, 100.0])
    batch = _batch([[1], [1], [1]], **{WEIGHT_KEY: torch.tensor([1.0, 1.0, 0.0]), NORM_KEY: {"rows": torch.tensor(2.0)}})
    assert float(batch_mean(values, batch)) == pytest.approx(2.0)
    assert float(batch_mean(values, _batch([[1], [1], [1]]))) == pytest.approx(104 / 3)  # outside training: the mean


@pytest.mark.parametrize("method", ["graddiff", "npo"])
def test_gradient_accumulation_takes_the_step_of_the_whole_batch(method, tiny_model_dir, demo_data_dir, tmp_path):
    """forget01's 6 items: batch 4 (steps of 4 and 2 rows) against batch 2 x 2 micro-batches (the second step one
    micro-batch); the answers differ in length, so a mean of the micro-batches' means would differ."""
    outs = []
    for batch_size, accum in ((4, 1), (2, 2)):
        cfg = load_run_config(None, method=method, model=str(tiny_model_dir), out=str(tmp_path / f"b{batch_size}"),
                              data="demo", data_dir=str(demo_data_dir), forget="forget01", retain="retain99", lora=False,
                              epochs=1, batch_size=batch_size, grad_accum=accum, lr=1e-3, progress=False)
        outs.append(train(cfg).out)
    w0, w1, w2 = (load_file(str(d / "model.safetensors")) for d in (tiny_model_dir, *outs))
    update = torch.sqrt(sum(((w1[k].double() - w0[k].double()) ** 2).sum() for k in w0))
    diff = torch.sqrt(sum(((w2[k].double() - w1[k].double()) ** 2).sum() for k in w0))
    assert float(update) > 1e-2 and float(diff / update) <= 1e-4
    assert len(logged_losses(outs[0])) == 2
    assert_same_losses(outs[0], outs[1], rel=1e-4)  # GradDiff's loss to 1e-4 of its terms (fixtures.weights)
