"""The loss building blocks of unlearn_methods/losses.py on a batch of two 3-token sequences (a prompt token, answers
of 2 and 1 tokens, one padded label), every expected value computed by hand from probabilities written as logits
(logits = log p, so softmax gives p back). Written to kill the mutants that survived benchmarks/mutation.py."""

import math
from types import SimpleNamespace

import pytest
import torch

from unlearn_methods.losses import (
    answer_mask,
    forward,
    kl_to_reference,
    masked_mean,
    mean_nll,
    sequence_nll,
    soft_cross_entropy,
    token_nll,
)

LN = math.log
Q, H, T = 0.25, 0.5, 1 / 3
#: position t predicts token t + 1; rows: sequence A = [0, 2, 1] (answer 2, 1), sequence B = [0, 1, 0] (answer 1, pad)
MODEL = [[[Q, Q, H], [0.2, 0.6, 0.2], [T, T, T]],
         [[Q, H, Q], [Q, Q, H], [T, T, T]]]
REFERENCE = [[[T, T, T], [H, Q, Q], [T, T, T]],
             [[T, T, T], [H, Q, Q], [T, T, T]]]
LABELS = torch.tensor([[-100, 2, 1], [-100, 1, -100]])
MASK = [[True, True], [True, False]]


def _logits(probs):
    return torch.tensor(probs).log()


def kl(p, q):
    """KL(p || q) by its definition."""
    return sum(a * LN(a / b) for a, b in zip(p, q))


def test_token_and_sequence_nll():
    nll, mask = token_nll(_logits(MODEL), LABELS)
    assert mask.tolist() == MASK
    assert nll.flatten().tolist() == pytest.approx([LN(2), LN(5 / 3), LN(2), 0.0])  # padded position: 0
    total, count = sequence_nll(_logits(MODEL), LABELS)
    assert total.tolist() == pytest.approx([LN(2) + LN(5 / 3), LN(2)]) and count.tolist() == [2, 1]
    assert mean_nll(_logits(MODEL), LABELS).item() == pytest.approx((2 * LN(2) + LN(5 / 3)) / 3)  # 3 answer tokens
    no_answer = torch.full((1, 3), -100)
    assert sequence_nll(_logits(MODEL[:1]), no_answer)[1].tolist() == [1]  # at least 1, no division by 0
    assert mean_nll(_logits(MODEL[:1]), no_answer).item() == 0.0


def test_kl_to_reference_averages_over_answer_positions():
    # answer positions: A0, A1, B0 (B1 is padding: its KL, which is not 0, is left out)
    a0 = kl([T, T, T], [Q, Q, H])
    a1 = kl([H, Q, Q], [0.2, 0.6, 0.2])
    assert a1 != pytest.approx(kl([H, Q, Q], [Q, Q, H]))  # position 1's own distribution matters
    b0 = kl([T, T, T], [Q, H, Q])
    got = kl_to_reference(_logits(MODEL), _logits(REFERENCE), LABELS).item()
    assert got == pytest.approx((a0 + a1 + b0) / 3, rel=1e-5)
    assert kl([H, Q, Q], [Q, Q, H]) > 0  # the padded position's KL would change the mean


def test_answer_mask_and_masked_mean():
    assert answer_mask(LABELS).tolist() == MASK
    values = torch.tensor([[1.0, 2.0], [3.0, 40.0]])
    assert masked_mean(values, answer_mask(LABELS)).item() == pytest.approx(2.0)
    assert masked_mean(values, torch.zeros(2, 2, dtype=torch.bool)).item() == 0.0


def test_soft_cross_entropy_per_position():
    target = torch.tensor([[H, H, 0.0]])
    got = soft_cross_entropy(_logits([[Q, Q, H]]), target)
    assert got.shape == (1,) and got.item() == pytest.approx(LN(4))


def test_forward_passes_the_mask_images_and_options():
    seen = {}

    def model(**kwargs):
        seen.update(kwargs)
        return SimpleNamespace(logits=None)

    batch = {"input_ids": torch.tensor([[1, 2]]), "attention_mask": torch.tensor([[1, 0]]),
             "labels": torch.tensor([[-100, 2]]), "pixel_values": torch.zeros(1, 3, 2, 2)}
    forward(model, batch, output_hidden_states=True)
    assert sorted(seen) == ["attention_mask", "input_ids", "output_hidden_states", "pixel_values"]
    assert seen["attention_mask"].tolist() == [[1, 0]] and seen["output_hidden_states"] is True
