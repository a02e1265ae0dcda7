"""Loss building blocks shared by the unlearning methods: answer-token NLL and KL between next-token distributions.

Batches are dicts with ``input_ids``, ``attention_mask`` and ``labels`` (-100 on prompt and padding), as built by
:class:`unlearn_methods.forget_retain.PairCollator` from :func:`unlearn_tasks.prompts.encode_qa`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

TEXT_KEYS = ("input_ids", "attention_mask", "labels")
#: Set by :class:`unlearn_methods.base.UnlearnTrainer` on each part of a micro-batch: this process's share of the
#: step's global counts (``rows``, ``tokens``, ``positions`` and a method's own), which the means below divide by.
NORM_KEY = "global_norm"
#: Set with it: each row's weight, 0 for a row repeated to fill the last batch of an epoch on several processes.
WEIGHT_KEY = "row_weight"
STEP_KEYS = (NORM_KEY, WEIGHT_KEY)
#: Each row's reference value computed once before training (:mod:`unlearn_methods.reference`): the frozen reference
#: model's summed answer NLL of the row, float32 [B], in the parts a method lists in ``reference_nll``.
REF_NLL_KEY = "reference_nll"


def share(batch: dict, kind: str, local: torch.Tensor) -> torch.Tensor:
    """What a mean over ``batch`` divides by: this process's share of the step's global ``kind`` count when the
    trainer set it (so the step is normalised over its global batch), else ``local`` (at least 1)."""
    norm = batch.get(NORM_KEY) if isinstance(batch, dict) else None
    if norm is not None and kind in norm:
        return norm[kind]
    return local.clamp_min(1) if torch.is_tensor(local) else torch.tensor(max(float(local), 1.0))


def row_weight(batch: dict, like: torch.Tensor) -> torch.Tensor:
    """Each row's weight (1, or 0 for a filler row), shaped and typed like the per-row ``like``."""
    weight = batch.get(WEIGHT_KEY) if isinstance(batch, dict) else None
    return torch.ones_like(like) if weight is None else weight.to(like.device, like.dtype)


def batch_mean(values: torch.Tensor, batch: dict) -> torch.Tensor:
    """Mean of per-sequence ``values`` over the rows of ``batch`` (over the step's global batch in training)."""
    return (values * row_weight(batch, values)).sum() / share(batch, "rows", torch.tensor(float(values.shape[0])))


def position_mask(batch: dict) -> torch.Tensor:
    """The attention mask with filler rows zeroed, [B, T]."""
    mask = batch["attention_mask"]
    return mask * row_weight(batch, mask[:, 0])[:, None]


def forward(model, batch: dict, **kwargs):
    """Run ``model`` on a batch (labels are not passed: every method computes its own loss). A vision-language
    batch also carries the processor's image tensors (``pixel_values``, ...), passed on as they are. A model without
    the ``logits_to_keep`` argument is run without it (every position's logits)."""
    images = {k: v for k, v in batch.items() if k not in TEXT_KEYS and k not in STEP_KEYS and k != REF_NLL_KEY}
    try:
        return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], **images, **kwargs)
    except TypeError as e:  # a model whose forward has no logits_to_keep (remote code): every position's logits
        if "logits_to_keep" not in kwargs or "logits_to_keep" not in str(e):
            raise
        kwargs = {k: v for k, v in kwargs.items() if k != "logits_to_keep"}
        return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], **images, **kwargs)


def answer_start(labels: torch.Tensor) -> int:
    """The first position whose next-token prediction some row of the batch scores (an answer token follows it):
    the positions before it predict prompt tokens only. 0 when no row has an answer token."""
    scored = answer_mask(labels).any(0).nonzero()
    return int(scored[0, 0]) if len(scored) else 0


def answer_logits(model, batch: dict, **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits, labels) of ``model`` on ``batch`` from :func:`answer_start` on: the earlier positions' logits (prompt
    tokens only, in every row) are not computed (the model's ``logits_to_keep``) and the labels are cut to match, so
    :func:`token_nll`, :func:`sequence_nll`, :func:`mean_nll` and :func:`kl_to_reference` give the values of the whole
    sequence in less time and memory (the vocabulary projection and its softmax skip the prompt)."""
    labels = batch["labels"]
    start = answer_start(labels)
    keep = labels.shape[1] - start
    logits = forward(model, batch, logits_to_keep=keep, **kwargs).logits
    if logits.shape[1] != keep:  # a model that computed every position's logits
        logits = logits[:, start:]
    return logits, labels[:, start:]


def token_nll(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token NLL of the next-token predictions and the mask of scored positions (both [B, T-1])."""
    logits, labels = logits[:, :-1].float(), labels[:, 1:]
    mask = labels != -100
    # rows of the vocabulary in memory order: 2-3x faster on a CPU than the [B, V, T] transpose of the same logits
    nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.clamp_min(0).reshape(-1), reduction="none")
    return nll.view(labels.shape) * mask, mask


def sequence_nll(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(summed answer NLL per sequence, number of answer tokens per sequence)."""
    nll, mask = token_nll(logits, labels)
    return nll.sum(-1), mask.sum(-1).clamp_min(1)


def mean_nll(logits: torch.Tensor, labels: torch.Tensor, batch: dict | None = None) -> torch.Tensor:
    """The usual language-model loss: NLL averaged over all answer tokens of the batch (of the step's global batch
    when ``batch`` carries the trainer's counts)."""
    nll, mask = token_nll(logits, labels)
    return nll.sum() / share(batch, "tokens", mask.sum())


def kl_to_reference(logits: torch.Tensor, ref_logits: torch.Tensor, labels: torch.Tensor,
                    batch: dict | None = None) -> torch.Tensor:
    """KL(reference || model) of the next-token distributions, averaged over answer positions (as :func:`mean_nll`)."""
    mask = (labels[:, 1:] != -100).float()
    logp = F.log_softmax(logits[:, :-1].float(), -1)
    ref_logp = F.log_softmax(ref_logits[:, :-1].float(), -1)
    kl = (ref_logp.exp() * (ref_logp - logp)).sum(-1)
    return (kl * mask).sum() / share(batch, "tokens", mask.sum())


def answer_mask(labels: torch.Tensor) -> torch.Tensor:
    """Positions of the next-token predictions that are scored (answer tokens), [B, T-1]."""
    return labels[:, 1:] != -100


def masked_mean(values: torch.Tensor, mask: torch.Tensor, batch: dict | None = None,
                kind: str = "tokens") -> torch.Tensor:
    """Mean of ``values`` over the positions where ``mask`` is true (0 when there are none); with ``batch``, over
    the step's global ``kind`` count (``mask`` must then count the same positions: answer tokens by default)."""
    mask = mask.to(values.dtype)
    return (values * mask).sum() / share(batch, kind, mask.sum())


def soft_cross_entropy(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the model's next-token distribution to a target distribution, per position."""
    return -(target * F.log_softmax(logits.float(), -1)).sum(-1)
