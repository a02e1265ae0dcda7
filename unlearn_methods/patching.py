"""Activation patching for ``unlearn depth``: a source model's hidden states written into a target model's decoder
layer output (a forward hook), and the target's teacher-forced log-probabilities of the evaluated tokens.

As the UDS release does it: the source runs on the same token ids; the state written into layer ``l``'s output is
the source's ``output_hidden_states[l + 1]`` (for the last layer that is the state after the final norm, as
transformers returns it); only the evaluated positions are replaced; a score is the mean log-probability of the
evaluated tokens. Sequences are right-padded in a batch (causal attention: padding changes no earlier position).

``states="layer_output"`` takes the source's decoder-layer outputs instead (captured by hooks): the same states for
every layer but the last, where it is the output before the final norm, so that patching a model's own states
changes nothing at any layer (with ``hidden_states`` the target applies its final norm to an already normed state)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch

from unlearn_methods.depth_items import DepthItem


def decoder_layers(model) -> torch.nn.ModuleList:
    """The model's decoder blocks (``model.model.layers``, or GPT-2's ``transformer.h``)."""
    inner = getattr(model, "model", None)
    if inner is not None and hasattr(inner, "layers"):
        return inner.layers
    if hasattr(getattr(model, "transformer", None), "h"):
        return model.transformer.h
    raise ValueError(f"{type(model).__name__}: no decoder layers found (model.model.layers or transformer.h)")


def batch_tensors(items: Sequence[DepthItem], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded token ids and attention mask of ``items``."""
    width = max(len(it.input_ids) for it in items)
    ids = torch.full((len(items), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(items), width), dtype=torch.long)
    for row, it in enumerate(items):
        ids[row, : len(it.input_ids)] = torch.tensor(it.input_ids)
        mask[row, : len(it.input_ids)] = 1
    return ids.to(device), mask.to(device)


def span_scores(logits: torch.Tensor, items: Sequence[DepthItem]) -> list[float]:
    """Per item, the mean log-probability of its evaluated tokens."""
    out = []
    for row, it in enumerate(items):
        logp = torch.log_softmax(logits[row, it.start : it.end].float(), dim=-1)
        labels = torch.tensor(it.labels, device=logits.device)
        out.append(logp.gather(-1, labels.unsqueeze(-1)).mean().item())
    return out


@contextmanager
def patched(model, layer: int, source: torch.Tensor, items: Sequence[DepthItem]) -> Iterator[None]:
    """Within the block, ``model``'s layer ``layer`` outputs ``source`` ([batch, seq, hidden]) at each item's
    evaluated positions."""

    def hook(module, inputs, output):
        hidden = output[0] if isinstance(output, tuple) else output
        hidden = hidden.clone()
        for row, it in enumerate(items):
            hidden[row, it.start : it.end] = source[row, it.start : it.end].to(hidden.dtype)
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    handle = decoder_layers(model)[layer].register_forward_hook(hook)
    try:
        yield
    finally:
        handle.remove()


#: Which source states are patched in: ``hidden_states`` (the release's) or ``layer_output`` (see above).
STATES = ("hidden_states", "layer_output")


def source_states(model, ids: torch.Tensor, mask: torch.Tensor, states: str = "hidden_states") -> list[torch.Tensor]:
    """The states of ``model`` to patch into each layer: element ``l`` goes into layer ``l``'s output."""
    if states == "hidden_states":
        return list(model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[1:])
    captured: list[torch.Tensor] = []
    hooks = [layer.register_forward_hook(lambda m, i, o: captured.append(o[0] if isinstance(o, tuple) else o))
             for layer in decoder_layers(model)]
    try:
        model(input_ids=ids, attention_mask=mask)
    finally:
        for h in hooks:
            h.remove()
    return captured


@torch.inference_mode()
def depth_scores(target, retain, unlearned, items: Sequence[DepthItem], pad_id: int, batch_size: int = 8,
                 layers: Sequence[int] | None = None, progress: Callable[[int], None] | None = None,
                 states: str = "hidden_states") -> tuple[list[float], list[list[float]], list[list[float]]]:
    """Per item: the target's unpatched score, and per layer its score with the retain model's (stage 1) and the
    unlearned model's (stage 2) states patched in. ``progress(n)`` is called after each batch of ``n`` items."""
    layers = list(range(len(decoder_layers(target)))) if layers is None else list(layers)
    device = next(target.parameters()).device
    full, s1, s2 = [], [], []
    for at in range(0, len(items), batch_size):
        batch = items[at : at + batch_size]
        ids, mask = batch_tensors(batch, pad_id, device)
        full += span_scores(target(input_ids=ids, attention_mask=mask).logits, batch)
        stage1, stage2 = [], []
        for source, scores in ((retain, stage1), (unlearned, stage2)):
            patches = source_states(source, ids, mask, states)
            for layer in layers:
                with patched(target, layer, patches[layer], batch):
                    scores.append(span_scores(target(input_ids=ids, attention_mask=mask).logits, batch))
            del patches
        s1 += [list(v) for v in zip(*stage1)]
        s2 += [list(v) for v in zip(*stage2)]
        if progress is not None:
            progress(len(batch))
    return full, s1, s2
