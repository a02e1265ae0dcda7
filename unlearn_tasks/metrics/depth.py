"""The Unlearning Depth Score (UDS, Lee, Kim and Jo 2026, arXiv 2605.24614) from patched log-probabilities: pure
functions, no model.

Per example, three kinds of score, each the mean log-probability of the answer's evaluated tokens under teacher
forcing in the target (full) model: ``full`` unpatched, ``s1[l]`` with layer ``l``'s output replaced by the retain
model's (stage 1), ``s2[l]`` by the unlearned model's (stage 2). With ``d1 = full - s1[l]`` and ``d2 = full - s2[l]``,
the knowledge-encoding (KE) layers are those with ``d1 > tau``; the example's UDS is

    sum over KE layers of d1 * clip(d2 / d1, 0, 1)  /  sum over KE layers of d1

(``clip(d2 / d1, 0, 1)`` is the layer erasure ratio, LER), undefined when no layer is KE. The model's UDS is the mean
over the examples where it is defined. 1 = the unlearned model's hidden states carry no more of the answer than the
retain model's; 0 = patching them in leaves the answer as likely as in the full model."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: The release's KE-layer threshold on d1 (its ``--delta_threshold`` default).
TAU = 0.05


@dataclass(frozen=True)
class ExampleDepth:
    """One example's deltas per layer, its KE layers and its UDS (None when no layer is KE)."""

    d1: tuple[float, ...]
    d2: tuple[float, ...]
    ke_layers: tuple[int, ...]
    uds: float | None


def layer_erasure_ratio(d1: float, d2: float) -> float:
    """``clip(d2 / d1, 0, 1)`` for a KE layer (``d1 > 0``)."""
    return min(max(d2 / d1, 0.0), 1.0)


def example_depth(full: float, s1: Sequence[float], s2: Sequence[float], tau: float = TAU) -> ExampleDepth:
    """UDS of one example from its unpatched score and its per-layer stage-1 and stage-2 scores."""
    if len(s1) != len(s2):
        raise ValueError(f"stage 1 has {len(s1)} layers, stage 2 {len(s2)}")
    d1 = tuple(full - v for v in s1)
    d2 = tuple(full - v for v in s2)
    ke = tuple(i for i, d in enumerate(d1) if d > tau)
    weight = sum(d1[i] for i in ke)
    uds = sum(d1[i] * layer_erasure_ratio(d1[i], d2[i]) for i in ke) / weight if ke else None
    return ExampleDepth(d1, d2, ke, uds)


def overall_uds(examples: Sequence[ExampleDepth]) -> float | None:
    """The mean UDS over the examples where it is defined; None when it is defined for none."""
    values = [e.uds for e in examples if e.uds is not None]
    return math.fsum(values) / len(values) if values else None


def per_layer(examples: Sequence[ExampleDepth]) -> list[dict]:
    """Per layer, over the examples: how many have it as a KE layer, the mean d1 and d2 over all examples, the mean
    LER over the examples where it is KE, and its d1-weighted LER (sum d1 * LER / sum d1 over those examples: the
    layer's share of the UDS numerator, 1 = erased as deeply as in the retain model). A summary of ours: the
    release reports the deltas per example and layer, and the UDS per example and overall."""
    if not examples:
        return []
    rows = []
    for layer in range(len(examples[0].d1)):
        ke = [e for e in examples if layer in e.ke_layers]
        lers = [layer_erasure_ratio(e.d1[layer], e.d2[layer]) for e in ke]
        weight = math.fsum(e.d1[layer] for e in ke)
        rows.append({
            "layer": layer,
            "n_ke": len(ke),
            "mean_d1": math.fsum(e.d1[layer] for e in examples) / len(examples),
            "mean_d2": math.fsum(e.d2[layer] for e in examples) / len(examples),
            "mean_ler": math.fsum(lers) / len(lers) if lers else None,
            "weighted_ler": math.fsum(e.d1[layer] * r for e, r in zip(ke, lers)) / weight if ke else None,
        })
    return rows
