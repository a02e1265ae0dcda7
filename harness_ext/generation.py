"""Greedy ``generate_until`` on lm-eval's ``hf`` backend with continuous batching: no row computed after it ended,
and no decoding step run with a batch emptier than it needs to be.

lm-eval 0.4.13 (``HFLM._model_generate``) runs one ``model.generate`` per batch: a row that reaches EOS keeps its
place and is fed padding until the longest row of the batch ends or hits ``max_gen_toks``, and the next batch
starts only then. Measured on a whole TOFU evaluation of SmolLM2-135M-Instruct (batch 8): 11,808 row-steps computed
for 4,874 tokens kept. Here (:func:`generate_continuously`) every request of a ``generate_until`` call is generated in
one loop that keeps ``--batch_size`` rows going: a row leaves at its EOS (its key/value cache rows with it) and the
next prompts are prefilled and join the batch at once. A step of a few rows costs on a CPU almost what a step of a
full batch costs (the weights are read either way), so keeping the batch full is what saves time. Each row is
computed from its own prompt with the same left-padding mask, position ids and argmax as ``generate``; only the
other rows of the matrix products change, so the texts are those of lm-eval's path up to float rounding in the
last bits (identical on every test set, the SmolLM2 evaluation included); the tensor returned is the one
lm-eval's path returns (ended rows padded with ``pad_token_id``).

Used only on lm-eval's ``hf`` class itself (not its subclasses: multimodal, steered, ...) with a plain
``transformers`` causal model (not a PEFT wrapper) whose cache is full attention (no sliding window), for greedy
decoding whose stop strings are all EOS tokens the model's generation config already stops at (TOFU, ReLU
generation, deep unlearning, MUSE VerbMem: ``until: []``) and whose generation config adds no logits processor
(repetition penalty, forced or suppressed tokens...). Anything else (real stop strings such as MUSE KnowMem's,
sampling, beams, such generation-config settings) takes lm-eval's path unchanged. ``UNLEARN_FAST_GENERATE=0``
switches it off.

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


#: generation-config fields whose non-default values add a logits processor (greedy decoding then is not argmax).
_PROCESSOR_FIELDS = ("repetition_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
                     "forced_bos_token_id", "forced_eos_token_id", "suppress_tokens", "sequence_bias",
                     "guidance_scale", "watermarking_config", "renormalize_logits", "remove_invalid_values",
                     "epsilon_cutoff", "eta_cutoff", "diversity_penalty", "length_penalty", "low_memory",
                     "token_healing", "dola_layers", "prompt_lookup_num_tokens", "assistant_model", "cache_implementation")


def _plain_argmax(lm: Any) -> bool:
    """Whether greedy ``generate`` on ``lm.model`` is the argmax of the model's last logits at every step (no logits
    processor from its generation config) with a cache whose rows this module can pad and join."""
    from transformers import GenerationConfig

    try:
        from transformers.cache_utils import DynamicLayer  # noqa: F401  (per-layer caches: transformers 4.56+)
    except ImportError:
        return False
    config, default = lm.model.generation_config, GenerationConfig()
    if any(getattr(config, f, None) != getattr(default, f, None) for f in _PROCESSOR_FIELDS):
        return False
    text_config = lm.model.config.get_text_config() if hasattr(lm.model.config, "get_text_config") else lm.model.config
    return not (getattr(text_config, "sliding_window", None) or getattr(text_config, "layer_types", None) and
                any(t != "full_attention" for t in text_config.layer_types))


def _cache_argument(model: Any) -> str:
    """The name ``model.forward`` takes the key/value cache under: ``cache`` in recent transformers (5.2x),
    ``past_key_values`` before (5.19 still, the version vLLM's CPU wheel pins)."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _left_pad(tensor: Any, width: int, value: Any = 0) -> Any:
    """``tensor`` ([rows, ..., T, ...] along dim -2 for caches, -1 for masks) left-padded to ``width``."""
    import torch

    dim = -2 if tensor.dim() == 4 else -1
    missing = width - tensor.shape[dim]
    if missing <= 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([torch.full(shape, value, dtype=tensor.dtype, device=tensor.device), tensor], dim=dim)


def generate_continuously(lm: Any, context: Any, attention_mask: Any, max_length: int, eos: set[int],
                          concurrency: int, progress: bool = False) -> Any:
    """Greedy generation of every row of ``context`` (left-padded prompts, ``attention_mask`` marking the real
    tokens) with at most ``concurrency`` rows computed at a time: a row leaves at its EOS (or after ``max_length -
    context.shape[1]`` new tokens) and the next prompts take the free places at once (continuous batching), so the
    decoding steps stay full instead of finishing each batch with its longest answer alone. Each row sees its own
    prompt, left padding masked and position ids counted from its first real token, as in ``generate``. Returns the
    tensor lm-eval's path returns: ``[rows, context + longest generation]``, ended rows padded."""
    import torch
    from tqdm import tqdm
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    model, pad = lm.model, lm.tokenizer.pad_token_id
    cache_name = _cache_argument(model)
    n_ctx, max_new = context.shape[1], max_length - context.shape[1]
    # each prompt from its first attended token (positions it hides further on, e.g. under open-unlearning's mask,
    # stay in place and hidden)
    starts = [int(m.ne(0).long().argmax()) for m in attention_mask]
    prompts = [row[s:] for row, s in zip(context, starts, strict=True)]
    prompt_masks = [m[s:] for m, s in zip(attention_mask, starts, strict=True)]
    rows: list[list[int]] = [[] for _ in prompts]
    waiting = list(range(len(prompts)))  # lm-eval's order (longest prompt first)
    alive: list[int] = []
    cache = mask = last = None
    bar = tqdm(total=len(prompts), desc=f"Generating ({concurrency} rows at a time)", disable=not progress)
    while waiting or alive:
        if waiting and len(alive) < concurrency:  # prefill the next prompts together, then join them to the batch
            admit, waiting = waiting[: concurrency - len(alive)], waiting[concurrency - len(alive) :]
            width = max(len(prompts[i]) for i in admit)
            ids = torch.stack([_left_pad(prompts[i], width, pad) for i in admit])
            new_mask = torch.stack([_left_pad(prompt_masks[i], width) for i in admit])
            new_cache = DynamicCache(config=model.config)
            positions = (new_mask.cumsum(-1) - 1).masked_fill(new_mask == 0, 1)  # as ``generate`` counts them
            out = model(input_ids=ids, attention_mask=new_mask, position_ids=positions, use_cache=True,
                        logits_to_keep=1, **{cache_name: new_cache})
            if any(type(layer) is not DynamicLayer or layer.keys is None for layer in new_cache.layers):
                raise _NoRowSelection  # another cache type, or the model did not fill the cache it was given
            new_last = out.logits[:, -1].argmax(-1)
            if cache is None:
                cache, mask, last = new_cache, new_mask, new_last
            else:
                joint = max(mask.shape[1], new_mask.shape[1])
                for old_layer, new_layer in zip(cache.layers, new_cache.layers, strict=True):
                    old_layer.keys = torch.cat([_left_pad(old_layer.keys, joint), _left_pad(new_layer.keys, joint)])
                    old_layer.values = torch.cat([_left_pad(old_layer.values, joint),
                                                  _left_pad(new_layer.values, joint)])
                mask = torch.cat([_left_pad(mask, joint), _left_pad(new_mask, joint)])
                last = torch.cat([last, new_last])
            fresh = len(alive)  # only the admitted rows have a new token
            alive += admit
        else:  # one decoding step of every live row
            mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
            positions = mask.sum(-1, keepdim=True) - 1
            out = model(input_ids=last[:, None], attention_mask=mask, position_ids=positions, use_cache=True,
                        logits_to_keep=1, **{cache_name: cache})
            last = out.logits[:, -1].argmax(-1)
            fresh = 0
        keep = list(range(fresh))
        for j, (i, token) in enumerate(zip(alive[fresh:], last[fresh:].tolist(), strict=True), start=fresh):
            rows[i].append(token)
            if token not in eos and len(rows[i]) < max_new:
                keep.append(j)
        if len(keep) < len(alive):
            bar.update(len(alive) - len(keep))
            index = torch.tensor(keep, dtype=torch.long, device=last.device)
            cache.batch_select_indices(index)
            mask, last = mask[index], last[index]
            alive = [alive[j] for j in keep]
            if not alive:
                cache = mask = last = None
            else:  # cache columns that no live row attends to any more
                unused = int((mask.sum(0) == 0).long().cumprod(0).sum())
                if unused:
                    for layer in cache.layers:
                        layer.keys, layer.values = layer.keys[:, :, unused:], layer.values[:, :, unused:]
                    mask = mask[:, unused:]
    bar.close()
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


_CONTINUOUS: contextvars.ContextVar = contextvars.ContextVar("unlearn_continuous_batching", default=None)


def _continuous_candidate(lm: Any, requests: list) -> bool:
    """Whether every ``generate_until`` request asks for greedy decoding with the same keywords, EOS as its only
    stop, and the model is a plain causal ``transformers`` model: the cases :func:`generate_continuously` takes
    (the final check, on the keywords lm-eval derives, is :func:`_eligible` in ``_model_generate``)."""
    first = requests[0].args[1]
    if not isinstance(first, dict) or any(r.args[1] != first for r in requests):
        return False
    kwargs = {k: v for k, v in first.items() if k not in ("until", "max_gen_toks")}
    eos = _eos_ids(lm, kwargs)
    until = first.get("until") or []
    return _eligible(lm, [until] if isinstance(until, str) else list(until), kwargs, eos) and _plain_argmax(lm)


def _in_batches(lm: Any, context: Any, max_length: int, stop: list[str], kwargs: dict, size: int, generate: Any) -> Any:
    """lm-eval's own batches of ``size`` rows from one left-padded ``context`` (each batch without the padding
    columns all its rows share, as lm-eval pads a batch), generated by ``generate`` and put back together."""
    import torch

    mask = kwargs.get("attention_mask")
    n_ctx, max_new = context.shape[1], max_length - context.shape[1]
    parts = []
    for start in range(0, context.shape[0], size):
        rows = slice(start, start + size)
        used = mask[rows].sum(0) > 0 if mask is not None else torch.ones(n_ctx, dtype=torch.bool)
        first = int(used.long().argmax()) if bool(used.any()) else 0
        part_kwargs = {**kwargs, **({"attention_mask": mask[rows, first:]} if mask is not None else {})}
        out = generate(lm, context[rows, first:], n_ctx - first + max_new, stop, **part_kwargs)
        parts.append(out[:, n_ctx - first :])
    width = max(p.shape[1] for p in parts)
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else 0
    result = torch.full((context.shape[0], n_ctx + width), pad, dtype=context.dtype, device=context.device)
    result[:, :n_ctx] = context
    for start, part in zip(range(0, context.shape[0], size), parts, strict=True):
        result[start : start + part.shape[0], n_ctx : n_ctx + part.shape[1]] = part
    return result


def patch_hf_generation() -> None:
    """Route greedy ``HFLM.generate_until`` through :func:`generate_continuously` where it applies (every request
    in one ``_model_generate`` call, ``--batch_size`` rows at a time), and generate the requests marked by
    :func:`mark_ou_attention_mask` under open-unlearning's mask (idempotent)."""
    from lm_eval.models.huggingface import HFLM

    original = HFLM._model_generate
    if getattr(original, "_unlearn_patched", False):
        return
    original_until = HFLM.generate_until

    def generate_until(self: Any, requests: list, disable_tqdm: bool = False) -> list:
        return _by_mark(requests, _OU_MASK, lambda part: _until(self, part, disable_tqdm))

    def _until(self: Any, requests: list, disable_tqdm: bool) -> list:
        concurrency = self.batch_size
        if not (type(self) is HFLM and isinstance(concurrency, int) and len(requests) > concurrency > 1
                and _continuous_candidate(self, requests)):
            return original_until(self, requests, disable_tqdm)
        # lm-eval hands every request to one _model_generate call, which keeps `concurrency` rows going
        token = _CONTINUOUS.set((concurrency, disable_tqdm or self.rank != 0))
        self.batch_size_per_gpu = len(requests)
        try:
            return original_until(self, requests, disable_tqdm)
        finally:
            self.batch_size_per_gpu = concurrency
            _CONTINUOUS.reset(token)

    def _model_generate(self: Any, context: Any, max_length: int, stop: list[str], **kwargs: Any) -> Any:
        if _OU_MASK.get() and getattr(self, "backend", None) == "causal":
            import torch

            mask = kwargs.get("attention_mask")
            mask = torch.ones_like(context) if mask is None else mask
            kwargs["attention_mask"] = ou_generation_mask(self.tokenizer, context, mask)
        continuous = _CONTINUOUS.get()
        concurrency = continuous[0] if continuous else context.shape[0]
        eos = _eos_ids(self, kwargs)
        if type(self) is HFLM and context.shape[0] > 1 and _eligible(self, stop, kwargs, eos) and _plain_argmax(self):
            import torch

            mask = kwargs.get("attention_mask")
            try:
                with _autocast(self), torch.no_grad():
                    return generate_continuously(self, context, mask if mask is not None else torch.ones_like(context),
                                                 max_length, eos, concurrency,
                                                 progress=bool(continuous) and not continuous[1])
            except _NoRowSelection:
                pass
        if continuous:  # lm-eval's own batches after all
            return _in_batches(self, context, max_length, stop, kwargs, concurrency, original)
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
