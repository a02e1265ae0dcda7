"""Loss building blocks shared by the unlearning methods: answer-token NLL and KL between next-token distributions.

Batches are dicts with ``input_ids``, ``attention_mask`` and ``labels`` (-100 on prompt and padding), as built by
:class:`unlearn_methods.forget_retain.PairCollator` from :func:`unlearn_tasks.prompts.encode_qa`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

TEXT_KEYS = ("input_ids", "attention_mask", "labels")


def forward(model, batch: dict, **kwargs):
    """Run ``model`` on a batch (labels are not passed: every method computes its own loss). A vision-language
    batch also carries the processor's image tensors (``pixel_values``, ...), passed on as they are."""
    images = {k: v for k, v in batch.items() if k not in TEXT_KEYS}
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], **images, **kwargs)


def token_nll(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token NLL of the next-token predictions and the mask of scored positions (both [B, T-1])."""
    logits, labels = logits[:, :-1].float(), labels[:, 1:]
    mask = labels != -100
    nll = F.cross_entropy(logits.transpose(1, 2), labels.clamp_min(0), reduction="none")
    return nll * mask, mask


def sequence_nll(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(summed answer NLL per sequence, number of answer tokens per sequence)."""
    nll, mask = token_nll(logits, labels)
    return nll.sum(-1), mask.sum(-1).clamp_min(1)


def mean_nll(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The usual language-model loss: NLL averaged over all answer tokens of the batch."""
    nll, mask = token_nll(logits, labels)
    return nll.sum() / mask.sum().clamp_min(1)


def kl_to_reference(logits: torch.Tensor, ref_logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """KL(reference || model) of the next-token distributions, averaged over answer positions."""
    mask = (labels[:, 1:] != -100).float()
    logp = F.log_softmax(logits[:, :-1].float(), -1)
    ref_logp = F.log_softmax(ref_logits[:, :-1].float(), -1)
    kl = (ref_logp.exp() * (ref_logp - logp)).sum(-1)
    return (kl * mask).sum() / mask.sum().clamp_min(1)


def answer_mask(labels: torch.Tensor) -> torch.Tensor:
    """Positions of the next-token predictions that are scored (answer tokens), [B, T-1]."""
    return labels[:, 1:] != -100


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``values`` over the positions where ``mask`` is true (0 when there are none)."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / mask.sum().clamp_min(1)


def soft_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the model's next-token distribution to a target distribution, per position."""
    return -(target * F.log_softmax(logits.float(), -1)).sum(-1)
