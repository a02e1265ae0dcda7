"""Per-token statistics of chosen tokens under a language model's next-token distributions, computed from logits
in chunks of positions so that full-vocabulary float32 log-probabilities exist only for a few rows at a time.

Pure torch (no lm-eval). For logits ``z`` at one position and the chosen token ``y``:

- ``logprobs``: ``log softmax(z)[y]``;
- ``vocab_mean`` / ``vocab_var``: mean and variance of ``log softmax(z)`` under ``softmax(z)`` (Min-K%++);
- ``margins``: ``z_y - logsumexp_{v != y} z_v`` (the KLoM margin), computed with ``y`` masked out, not from
  ``logprobs`` (which loses precision when ``p_y`` is close to 1);
- ``argmax_match``: 1.0 where ``y`` is the argmax of ``z`` (torch's: the first of tied maxima), else 0.0 (the
  teacher-forced predictions of exact memorization and extraction strength).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

#: float32 elements per chunk (16 MiB): at a 128,256-token vocabulary, 32 positions at a time.
CHUNK_ELEMENTS = 1 << 22

FIELDS = ("logprobs", "vocab_mean", "vocab_var", "margins", "argmax_match")


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
        out["argmax_match"][rows] = (lp.argmax(-1) == y.squeeze(-1)).float()
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


def score_sequences(logits: torch.Tensor, spans: Sequence[tuple[int, int]], targets: Sequence[Sequence[int]],
                    chunk_elements: int = CHUNK_ELEMENTS) -> list[dict[str, list[float]]]:
    """Statistics for a batch of sequences from one forward pass: ``logits`` [B, T, V]; for row ``b``, the
    positions ``spans[b] = (start, end)`` predict ``targets[b]`` (``end - start == len(targets[b])``). The
    logits are read in place (views); only chunks of scored positions are copied, so the extra memory is a few
    chunks whatever B and T. One dict of Python lists per row, keys :data:`FIELDS`."""
    vocab = logits.shape[-1]
    step = max(1, chunk_elements // max(vocab, 1))
    pieces: list[tuple[int, int, int]] = []  # (row, start, end), each at most `step` positions
    for b, ((start, end), tgt) in enumerate(zip(spans, targets, strict=True)):
        if end - start != len(tgt):
            raise ValueError(f"row {b}: span {start}:{end} does not match {len(tgt)} targets")
        pieces.extend((b, s, min(s + step, end)) for s in range(start, end, step))
    flat = torch.tensor([t for tgt in targets for t in tgt], dtype=torch.long, device=logits.device)
    columns: dict[str, list[float]] = {name: [] for name in FIELDS}
    offset, i = 0, 0
    while i < len(pieces):  # group consecutive pieces into chunks of at most `step` positions
        group, size = [pieces[i]], pieces[i][2] - pieces[i][1]
        i += 1
        while i < len(pieces) and size + pieces[i][2] - pieces[i][1] <= step:
            group.append(pieces[i])
            size += pieces[i][2] - pieces[i][1]
            i += 1
        views = [logits[b, s:e] for b, s, e in group]
        chunk = views[0] if len(views) == 1 else torch.cat(views)
        stats = position_statistics(chunk, flat[offset : offset + size], chunk_elements=size * vocab)
        for name in FIELDS:
            columns[name].extend(stats[name].tolist())
        offset += size
    results, offset = [], 0
    for tgt in targets:
        results.append({name: columns[name][offset : offset + len(tgt)] for name in FIELDS})
        offset += len(tgt)
    return results


__all__ = ["CHUNK_ELEMENTS", "FIELDS", "position_statistics", "score_sequences"]
