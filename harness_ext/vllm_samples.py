"""The n samples of a prompt in one vLLM request, for the requests a task marks (Leak@k's).

lm-eval 0.4.13 runs a request of ``repeats`` n as n copies of the same ``Instance`` (``evaluate``:
``[req] * req.repeats``), and its ``vllm`` backend sends each copy as its own prompt and keeps ``outputs[0]``. A task
marks its sampled requests with :func:`mark_samples_in_one_request`; the patched ``VLLM.generate_until``
(:func:`patch_vllm_generation`) then groups the copies of each marked, sampled request (:func:`sample_groups`) and
asks vLLM once per prompt with ``SamplingParams(n=...)``, handing the copies the n outputs in order. Everything else
(greedy requests, unmarked ones, a marked request under ``--gen_kwargs do_sample=False``) takes lm-eval's path
unchanged, in one call with the same arguments. ``UNLEARN_VLLM_SAMPLES=0`` switches the grouping off (lm-eval's n
copies).

Seeds: none per request, as on lm-eval's own path: vLLM draws every sample from its engine-wide generator, seeded
with the backend's ``seed`` model argument (lm-eval's default 1234), so the same run on a fresh engine gives the same
samples. (A per-request ``SamplingParams.seed`` would make a prompt's samples its own, but vLLM 0.32 on CPU fails on
a seeded request whose prompt is prefilled in chunks: "CPU Generator does not use offset"; a seed among the
generation keywords is still passed on, as lm-eval passes it.)
"""

from __future__ import annotations

import os
from typing import Any

ENV_SWITCH = "UNLEARN_VLLM_SAMPLES"
#: the request attribute a task sets to have vLLM draw a request's ``repeats`` samples in one request.
SAMPLES_ATTRIBUTE = "unlearn_samples_in_one_request"


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in {"0", "false", "no", "off"}


def mark_samples_in_one_request(request: Any) -> Any:
    """Mark the ``generate_until`` request ``request``: on ``vllm`` its ``repeats`` copies are one request."""
    setattr(request, SAMPLES_ATTRIBUTE, True)
    return request


def is_sampled(gen_kwargs: dict) -> bool:
    """Whether lm-eval samples under ``gen_kwargs``: its normalised temperature (0 when ``do_sample`` is False or
    neither is given) is above 0."""
    from lm_eval.models.utils import normalize_gen_kwargs

    return float(normalize_gen_kwargs(gen_kwargs).get("temperature") or 0.0) > 0.0


def sample_groups(requests: list) -> tuple[list[int], list[list[int]]]:
    """(the positions of the requests lm-eval's path generates, the groups): one group per marked, sampled request,
    listing in order the positions of its copies (the same object), groups in order of their first copy."""
    plain: list[int] = []
    groups: dict[int, list[int]] = {}
    for i, request in enumerate(requests):
        if getattr(request, SAMPLES_ATTRIBUTE, False) and is_sampled(request.args[1]):
            groups.setdefault(id(request), []).append(i)
        else:
            plain.append(i)
    return plain, list(groups.values())


def _stop_string(lm: Any) -> str:
    """The EOS text lm-eval's ``VLLM.generate_until`` adds to the stop sequences."""
    eos = lm.tokenizer.decode(lm.eot_token_id)
    return eos or getattr(lm.tokenizer, "eos_token", None) or eos


def generate_sample_groups(lm: Any, requests: list, counts: list[int]) -> list[list[str]]:
    """``counts[j]`` samples of each request ``requests[j]`` (a ``generate_until`` request), one vLLM request each,
    built as lm-eval's ``VLLM.generate_until`` builds it (stop sequences, token budget, truncation, the texts'
    post-processing and cache entries) with ``n`` added."""
    from lm_eval.models.utils import maybe_truncate, postprocess_generated_text
    from vllm import SamplingParams

    eos = _stop_string(lm)
    contexts = [r.args[0] for r in requests]
    encoded = lm.tok_encode(contexts)
    prompts, params, keys = [], [], []
    for toks, request, count in zip(encoded, requests, counts, strict=True):
        kwargs, until, max_gen_toks = lm.modify_gen_kwargs(request.args[1], eos=eos,
                                                           default_max_gen_toks=lm.max_gen_toks)
        toks, max_gen_toks = maybe_truncate(toks, max_gen_toks=max_gen_toks, max_model_len=lm.max_length,
                                            side=lm.truncation_side, verbose=True)
        stop = [s for s in until if s == eos] if lm.think_end_token else until
        prompts.append(toks)
        params.append(SamplingParams(n=count, max_tokens=max_gen_toks, stop=stop, **kwargs))
        keys.append(kwargs | {"until": until, "max_gen_toks": max_gen_toks})  # lm-eval's cache key
    size = lm.batch_size if isinstance(lm.batch_size, int) and lm.batch_size > 0 else len(prompts) or 1
    results: list[list[str]] = []
    for start in range(0, len(prompts), size):
        part = slice(start, start + size)
        outputs = lm._model_generate(requests=prompts[part], generate=True, sampling_params=params[part])
        for output, context, key in zip(outputs, contexts[part], keys[part], strict=True):
            texts = [postprocess_generated_text(o.text, key["until"], lm.think_end_token)
                     for o in sorted(output.outputs, key=lambda o: o.index)]
            for text in texts:
                lm.cache_hook.add_partial("generate_until", (context, key), text)
            results.append(texts)
    return results


def generate_until_grouped(lm: Any, requests: list, run: Any) -> list[str]:
    """lm-eval's ``generate_until`` (``run``) on the requests :func:`sample_groups` leaves alone (all of them, in
    one call, when none is grouped or the grouping is off), :func:`generate_sample_groups` on the groups; answers in
    request order."""
    if not enabled():
        return run(requests)
    plain, groups = sample_groups(requests)
    if not groups:
        return run(requests)
    results: list[Any] = [None] * len(requests)
    if plain:
        for i, text in zip(plain, run([requests[i] for i in plain]), strict=True):
            results[i] = text
    samples = generate_sample_groups(lm, [requests[g[0]] for g in groups], [len(g) for g in groups])
    for group, texts in zip(groups, samples, strict=True):
        for i, text in zip(group, texts, strict=True):
            results[i] = text
    return results


def patch_vllm_generation(cls: type) -> None:
    """Route ``cls.generate_until`` (lm-eval's ``VLLM``) through :func:`generate_until_grouped` (idempotent)."""
    original = cls.generate_until
    if getattr(original, "_unlearn_patched", False):
        return

    def generate_until(self: Any, requests: list, disable_tqdm: bool = False) -> list[str]:
        return generate_until_grouped(self, requests, lambda part: original(self, part, disable_tqdm))

    generate_until._unlearn_patched = True  # type: ignore[attr-defined]
    cls.generate_until = generate_until


__all__ = ["ENV_SWITCH", "SAMPLES_ATTRIBUTE", "enabled", "generate_sample_groups", "generate_until_grouped", "is_sampled",
           "mark_samples_in_one_request", "patch_vllm_generation", "sample_groups"]
