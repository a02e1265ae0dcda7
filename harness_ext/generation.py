"""Greedy ``generate_until`` on lm-eval's ``hf`` backend without computing rows that have already ended.

lm-eval 0.4.13 (``HFLM._model_generate``) runs one ``model.generate`` per batch: a row that reaches EOS keeps its
place and is fed padding until the longest row of the batch ends or hits ``max_gen_toks``. Measured on a whole
TOFU evaluation of SmolLM2-135M-Instruct (batch 8): 11,808 row-steps computed for 4,874 tokens kept. Here the
batch is generated in segments: ``model.generate`` stops as soon as a row emits one of the model's EOS ids, the rows
that ended leave the batch (their key/value cache rows with them) and ``generate`` continues the others from the
cache. Each remaining row runs the same greedy steps on the same prefix and padding; only the number of rows in
the matrix products changes, so the tokens, and the texts lm-eval scores, are those of lm-eval's own path (tested
item by item on the tiny model and on SmolLM2); the tensor returned is the one lm-eval's path returns (ended rows
padded with ``pad_token_id``).

Used only on lm-eval's ``hf`` class itself (not its subclasses: multimodal, steered, ...) with a plain
``transformers`` causal model (not a PEFT wrapper), for greedy decoding whose stop strings are all EOS tokens the
model's generation config already stops at (TOFU, ReLU generation, deep unlearning, MUSE VerbMem: ``until: []``);
lm-eval's per-step string check is then redundant and skipped. Anything else (real stop strings such as MUSE
KnowMem's, sampling, beams, generation-config settings that count steps) takes lm-eval's path unchanged.
``UNLEARN_FAST_GENERATE=0`` switches it off.

open-unlearning's attention mask (:func:`harness_ext.chat_tokens.ou_attention_mask`) on generation: a task marks a
``generate_until`` request with :func:`mark_ou_attention_mask` (TOFU's ``tofu`` mode in a chat template); ``hf``
then generates the marked requests as their own batches, with every prompt position holding the pad token hidden,
and the position ids ``generate`` derives from that mask (both paths above). The mark is an attribute of the
request, not a generation keyword, so no backend ever receives it: on ``vllm`` (no attention mask over a prompt)
marked requests generate from the plain prompt. lm-eval's request cache (``--use_cache``) keys the marked requests
apart from the others (:func:`patch_generation_cache`), so a generation cached under one mask is never returned
under the other.
"""

from __future__ import annotations

import contextvars
import os
from typing import Any

ENV_SWITCH = "UNLEARN_FAST_GENERATE"
#: the request attribute a task sets to generate under open-unlearning's attention mask (``hf`` only).
OU_MASK_ATTRIBUTE = "unlearn_ou_attention_mask"
_OU_MASK = contextvars.ContextVar("unlearn_ou_attention_mask", default=False)
#: generation kwargs under which the segmented path is the same computation as lm-eval's (others fall back).
_ALLOWED_KWARGS = {"attention_mask", "do_sample", "temperature"}
#: generation-config settings that count steps from the start of a ``generate`` call.
_STEP_DEPENDENT = ("min_new_tokens", "begin_suppress_tokens", "exponential_decay_length_penalty", "max_new_tokens")


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in {"0", "false", "no", "off"}


def _eos_ids(lm: Any, kwargs: dict) -> set[int]:
    eos = kwargs.get("eos_token_id", getattr(lm.model.generation_config, "eos_token_id", None))
    if eos is None:
        return set()
    return {int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])}


def _eligible(lm: Any, stop: list[str], kwargs: dict, eos: set[int]) -> bool:
    from transformers import PreTrainedModel

    if not enabled() or getattr(lm, "backend", None) != "causal" or not isinstance(lm.model, PreTrainedModel):
        return False
    if set(kwargs) - _ALLOWED_KWARGS or kwargs.get("do_sample") or kwargs.get("temperature", 0.0) not in (0.0, None):
        return False
    if not eos or lm.tokenizer.pad_token_id is None:
        return False
    config = lm.model.generation_config
    if (config.min_length or 0) > 0 or any(getattr(config, k, None) is not None for k in _STEP_DEPENDENT):
        return False  # they depend on where a generate call starts, which the segments move
    eos_texts = {lm.tokenizer.decode([e], skip_special_tokens=False) for e in eos}
    return all(s in eos_texts for s in stop if s)


class _NoRowSelection(Exception):
    """The model's cache cannot keep a subset of the batch's rows."""


class _AnyRowEnded:
    """Stopping criterion: the whole batch stops at the step where any row emits an EOS id."""

    def __init__(self, eos: set[int]) -> None:
        self.eos = eos

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        ended = torch.isin(input_ids[:, -1], torch.tensor(sorted(self.eos), device=input_ids.device))
        return torch.full_like(ended, bool(ended.any()))


def _cache_argument() -> str:
    """The name ``generate`` takes and returns the key/value cache under (``cache`` from transformers 5.2x)."""
    import transformers.generation.utils as generation_utils

    return "cache" if hasattr(generation_utils, "ALL_CACHE_NAMES") else "past_key_values"


def generate_dropping_ended_rows(lm: Any, context: Any, attention_mask: Any, max_length: int, eos: set[int]) -> Any:
    """Greedy generation of the batch ``context`` to ``max_length`` tokens (context included); rows leave the batch
    at their EOS. Returns ``[batch, context + longest generation]`` token ids, ended rows padded."""
    import torch
    from transformers import StoppingCriteriaList

    pad = lm.tokenizer.pad_token_id
    n_ctx = context.shape[1]
    rows: list[list[int]] = [[] for _ in range(context.shape[0])]
    alive = list(range(context.shape[0]))
    ids, mask, cache = context, attention_mask, None
    cache_name = _cache_argument()
    while alive and ids.shape[1] < max_length:
        resume = {cache_name: cache} if cache is not None else {}
        out = lm.model.generate(input_ids=ids, attention_mask=mask, max_length=max_length, do_sample=False,
                                stopping_criteria=StoppingCriteriaList([_AnyRowEnded(eos)]), pad_token_id=pad,
                                use_cache=True, return_dict_in_generate=True, **resume)
        seqs = out.sequences
        # the output names the cache as this transformers version does (``cache`` or ``past_key_values``), and
        # ``generate`` takes it back under the same name; a version that returns neither: lm-eval's path instead
        cache_name = next((n for n in (cache_name, "cache", "past_key_values") if getattr(out, n, None) is not None),
                          None)
        if cache_name is None:
            raise _NoRowSelection
        cache = getattr(out, cache_name)
        new = seqs[:, ids.shape[1]:]
        keep = []
        for i, row in enumerate(new.tolist()):
            for token in row:
                rows[alive[i]].append(token)
                if token in eos:
                    break
            else:
                keep.append(i)
        if not keep or seqs.shape[1] >= max_length:
            break
        if not hasattr(cache, "batch_select_indices"):
            raise _NoRowSelection  # a cache that cannot drop rows (e.g. a stateful model's): lm-eval's path instead
        index = torch.tensor(keep, device=seqs.device)
        cache.batch_select_indices(index)
        grown = torch.ones((len(keep), new.shape[1]), dtype=mask.dtype, device=mask.device)
        ids, mask = seqs[index], torch.cat([mask[index], grown], dim=1)
        alive = [alive[i] for i in keep]
    width = max(len(r) for r in rows)
    out_ids = torch.full((len(rows), n_ctx + width), pad, dtype=context.dtype, device=context.device)
    out_ids[:, :n_ctx] = context
    for i, r in enumerate(rows):
        out_ids[i, n_ctx : n_ctx + len(r)] = torch.tensor(r, dtype=context.dtype)
    return out_ids


def mark_ou_attention_mask(request: Any) -> Any:
    """Mark the ``generate_until`` request ``request`` to be generated under open-unlearning's attention mask."""
    setattr(request, OU_MASK_ATTRIBUTE, True)
    return request


def ou_generation_mask(tokenizer: Any, context: Any, attention_mask: Any) -> Any:
    """``attention_mask`` with every position of ``context`` holding open-unlearning's pad token hidden (the
    tokenizer's pad token, its EOS when it has none), as :func:`harness_ext.chat_tokens.ou_attention_mask`."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return attention_mask * (context != pad).to(attention_mask.dtype)


def patch_hf_generation() -> None:
    """Route ``HFLM._model_generate`` through :func:`generate_dropping_ended_rows` where it is exact, and generate
    the requests marked by :func:`mark_ou_attention_mask` under open-unlearning's mask (idempotent)."""
    from lm_eval.models.huggingface import HFLM

    original = HFLM._model_generate
    if getattr(original, "_unlearn_patched", False):
        return
    original_until = HFLM.generate_until

    def generate_until(self: Any, requests: list, disable_tqdm: bool = False) -> list:
        return _by_mark(requests, _OU_MASK, lambda part: original_until(self, part, disable_tqdm))

    def _model_generate(self: Any, context: Any, max_length: int, stop: list[str], **kwargs: Any) -> Any:
        if _OU_MASK.get() and getattr(self, "backend", None) == "causal":
            import torch

            mask = kwargs.get("attention_mask")
            mask = torch.ones_like(context) if mask is None else mask
            kwargs["attention_mask"] = ou_generation_mask(self.tokenizer, context, mask)
        eos = _eos_ids(self, kwargs)
        if type(self) is not HFLM or context.shape[0] < 2 or not _eligible(self, stop, kwargs, eos):
            return original(self, context, max_length, stop, **kwargs)
        mask = kwargs.get("attention_mask")
        if mask is None:
            import torch

            mask = torch.ones_like(context)
        try:
            with _autocast(self):
                return generate_dropping_ended_rows(self, context, mask, max_length, eos)
        except _NoRowSelection:
            return original(self, context, max_length, stop, **kwargs)

    _model_generate._unlearn_patched = True  # type: ignore[attr-defined]
    HFLM._model_generate = _model_generate
    HFLM.generate_until = generate_until


def _by_mark(requests: list, flag: contextvars.ContextVar, run: Any) -> list:
    """``run(requests)``, called once for the unmarked requests and once, with ``flag`` set, for those marked by
    :func:`mark_ou_attention_mask`; the results in the order of ``requests``."""
    marked = [i for i, r in enumerate(requests) if getattr(r, OU_MASK_ATTRIBUTE, False)]
    if not marked:
        return run(requests)
    results: list = [None] * len(requests)
    plain = [i for i, r in enumerate(requests) if not getattr(r, OU_MASK_ATTRIBUTE, False)]
    for indices, masked in ((plain, False), (marked, True)):
        if not indices:
            continue
        token = flag.set(masked)
        try:
            out = run([requests[i] for i in indices])
        finally:
            flag.reset(token)
        for i, text in zip(indices, out, strict=True):
            results[i] = text
    return results


_CACHE_MARKED = contextvars.ContextVar("unlearn_cache_ou_attention_mask", default=False)


def patch_generation_cache() -> None:
    """``lm_eval --use_cache``: lm-eval's ``CachingLM`` keys a ``generate_until`` request by a hash of its arguments
    (prompt, generation keywords: ``lm_eval.api.model.hash_args``), which the mark of :func:`mark_ou_attention_mask`
    is not part of, so a generation cached under one attention mask would be returned under the other (TOFU's
    ``ou_chat_mask`` option). Here the marked requests are looked up and stored under the hash of their arguments
    followed by the mark, ``{"unlearn_ou_attention_mask": true}``; unmarked requests keep lm-eval's keys
    (idempotent)."""
    import lm_eval.api.model as lm_model

    original_getattr = lm_model.CachingLM.__getattr__
    if getattr(original_getattr, "_unlearn_patched", False):
        return
    original_hash = lm_model.hash_args

    def hash_args(attr: str, args: Any) -> str:
        return original_hash(attr, [*args, {OU_MASK_ATTRIBUTE: True}] if _CACHE_MARKED.get() else args)

    def __getattr__(self: Any, attr: str) -> Any:
        cached = original_getattr(self, attr)
        if attr != "generate_until":
            return cached
        return lambda requests: _by_mark(requests, _CACHE_MARKED, cached)

    __getattr__._unlearn_patched = True  # type: ignore[attr-defined]
    lm_model.hash_args = hash_args
    lm_model.CachingLM.__getattr__ = __getattr__


def _autocast(lm: Any) -> Any:
    """lm-eval's autocast context around generation (its ``mixed_precision_dtype`` option)."""
    import torch

    dtype = getattr(lm, "mixed_precision_dtype", None)
    return torch.autocast(device_type=lm.device.type, dtype=dtype, enabled=dtype is not None)
