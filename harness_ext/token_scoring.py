"""Per-token statistics of chosen tokens under a language model's next-token distributions, computed from logits
in chunks of positions so that full-vocabulary float32 log-probabilities exist only for a few rows at a time.

Pure torch (no lm-eval). For logits ``z`` at one position and the chosen token ``y``:

- ``logprobs``: ``log softmax(z)[y]``;
- ``vocab_mean`` / ``vocab_var``: mean and variance of ``log softmax(z)`` under ``softmax(z)`` (Min-K%++);
- ``margins``: ``z_y - logsumexp_{v != y} z_v`` (the KLoM margin), computed with ``y`` masked out, not from
  ``logprobs`` (which loses precision when ``p_y`` is close to 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

#: float32 elements per chunk (32 MiB): at a 128,256-token vocabulary, 65 positions at a time.
CHUNK_ELEMENTS = 1 << 23

FIELDS = ("logprobs", "vocab_mean", "vocab_var", "margins")


def position_statistics(logits: torch.Tensor, targets: torch.Tensor,
                        chunk_elements: int = CHUNK_ELEMENTS) -> dict[str, torch.Tensor]:
    """Statistics of ``targets`` [N] under ``logits`` [N, V] (any float dtype); float32 tensors [N] on the same
    device. Each chunk of rows is upcast to float32 on its own, so the extra memory is about three chunks."""
    if logits.dim() != 2 or targets.shape != logits.shape[:1]:
        raise ValueError(f"expected logits [N, V] and targets [N], got {tuple(logits.shape)} and {tuple(targets.shape)}")
    n, vocab = logits.shape
    out = {name: torch.empty(n, dtype=torch.float32, device=logits.device) for name in FIELDS}
    step = max(1, chunk_elements // max(vocab, 1))
    for start in range(0, n, step):
        rows = slice(start, min(start + step, n))
        y = targets[rows].to(device=logits.device, dtype=torch.long)[:, None]
        lp = F.log_softmax(logits[rows].float(), dim=-1)
        chosen = lp.gather(-1, y).squeeze(-1)
        weighted = lp.exp().mul_(lp)  # p * lp
        mean = weighted.sum(-1)
        var = weighted.mul_(lp).sum(-1) - mean * mean  # p * lp * lp
        del weighted
        others = torch.logsumexp(lp.scatter_(-1, y, float("-inf")), dim=-1)
        out["logprobs"][rows] = chosen
        out["vocab_mean"][rows] = mean
        out["vocab_var"][rows] = var.clamp_min(0)
        out["margins"][rows] = chosen - others
        del lp
    return out


def select_positions(logits: torch.Tensor, spans: Sequence[tuple[int, int]]) -> torch.Tensor:
    """Rows ``[start, end)`` of each sequence of ``logits`` [B, T, V], stacked into [N, V] in the logits' own
    dtype. Call it on the model's output directly (``select_positions(model(x).logits, spans)``) so that the
    full [B, T, V] tensor can be freed as soon as it returns."""
    rows = [b for b, (start, end) in enumerate(spans) for _ in range(start, end)]
    positions = [t for start, end in spans for t in range(start, end)]
    device = logits.device
    return logits[torch.tensor(rows, dtype=torch.long, device=device),
                  torch.tensor(positions, dtype=torch.long, device=device)]


def score_sequences(selected: torch.Tensor, targets: Sequence[Sequence[int]],
                    chunk_elements: int = CHUNK_ELEMENTS) -> list[dict[str, list[float]]]:
    """Statistics for a batch of sequences: ``selected`` [N, V] from :func:`select_positions`, ``targets[b]``
    the tokens that row ``b``'s positions score (in order; the lengths add up to N). One dict of Python lists
    per sequence, keys :data:`FIELDS`."""
    flat = [t for tgt in targets for t in tgt]
    if len(flat) != selected.shape[0]:
        raise ValueError(f"{len(flat)} targets for {selected.shape[0]} selected positions")
    stats = position_statistics(selected, torch.tensor(flat, dtype=torch.long, device=selected.device),
                                chunk_elements)
    columns = {name: stats[name].tolist() for name in FIELDS}
    results, offset = [], 0
    for tgt in targets:
        results.append({name: columns[name][offset : offset + len(tgt)] for name in FIELDS})
        offset += len(tgt)
    return results


__all__ = ["CHUNK_ELEMENTS", "FIELDS", "position_statistics", "score_sequences", "select_positions"]
