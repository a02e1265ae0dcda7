"""Image-conditioned per-token answer log-probabilities for lm-eval's ``hf-multimodal`` and ``vllm-vlm`` backends.

lm-eval 0.4.13 scores images only in ``generate_until``: ``hf-multimodal`` raises NotImplementedError for
log-likelihoods with images and ``vllm-vlm`` has none. The ``unlearn_answer_logprobs`` request type (see
:mod:`harness_ext.answer_logprobs`) reaches this module for those backends. A request is
``(context, continuation)`` or ``(context, continuation, {"visual": [PIL images]})``; the context holds one
``<image>`` placeholder per image (replaced by the model's image token, as lm-eval does for generation; with
``--apply_chat_template`` the processor's template already put its own image token there). The result per
request equals a direct forward pass ``model(**processor(text=context + continuation, images=images))`` over the
continuation tokens plus EOS (tested; ``append_eos: False`` in the request's dict drops the EOS), with the vocabulary mean/variance of log p at each position (Min-K%++).

Requests without images take the text path (the same numbers the ``hf`` backend gives).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

IMAGE_PLACEHOLDER = "<image>"


def visuals_of(request: Any) -> list:
    """The images of a request (empty for a text-only one)."""
    args = request.args
    if len(args) < 3 or not isinstance(args[2], dict):
        return []
    return list(args[2].get("visual") or [])


def _split_whitespace(context: str, continuation: str) -> tuple[str, str]:
    """Move the context's trailing whitespace to the continuation (lm-eval's convention)."""
    n = len(context) - len(context.rstrip())
    return (context[:-n], context[-n:] + continuation) if n else (context, continuation)


def _prepare_images(lm: Any, images: list) -> list:
    from lm_eval.models.utils import resize_image

    size = (getattr(lm, "image_width", None), getattr(lm, "image_height", None), getattr(lm, "image_max_side", None))
    images = [resize_image(img, *size) for img in images][: getattr(lm, "max_images", None) or len(images)]
    return [img.convert("RGB") for img in images] if getattr(lm, "rgb", False) else images


def _prompt_text(lm: Any, context: str) -> str:
    """The context with ``<image>`` placeholders replaced by the model's image token (unless a chat template ran)."""
    if getattr(lm, "chat_applied", False):
        return context
    from lm_eval.models.utils import replace_placeholders

    return replace_placeholders(context, IMAGE_PLACEHOLDER, lm.image_token, lm.max_images)


def _continuation_length(tokenizer: Any, context: str, whole: str) -> int:
    """Tokens of ``whole`` after ``context``. Image tokens expand identically in both, so the text-only
    tokenisation gives the same difference as the processor's (whose expansion depends on the image)."""
    return len(tokenizer(whole)["input_ids"]) - len(tokenizer(context)["input_ids"])


def _score_text_only(lm: Any, requests: list, text_path: Callable[[Any, list], list[dict]]
                     ) -> tuple[list[dict | None], list[int]]:
    """Results with the requests without images scored by the text path, and the indices of those with images."""
    results: list[dict | None] = [None] * len(requests)
    text_only = [i for i, r in enumerate(requests) if not visuals_of(r)]
    if text_only:
        for i, out in zip(text_only, text_path(lm, [requests[i] for i in text_only]), strict=True):
            results[i] = out
    return results, [i for i, r in enumerate(requests) if visuals_of(r)]


def hf_multimodal_answer_logprobs(lm: Any, requests: list, text_path: Callable[[Any, list], list[dict]]) -> list[dict]:
    """``unlearn_answer_logprobs`` on ``hf-multimodal``: one forward pass per batch of (images + text)."""
    import torch
    from tqdm import tqdm

    from harness_ext.token_scoring import score_sequences

    results, with_images = _score_text_only(lm, requests, text_path)
    if not with_images:
        return results  # type: ignore[return-value]

    tokenizer = lm.processor.tokenizer
    prepared = []
    for i in with_images:
        context, continuation = _split_whitespace(*requests[i].args[:2])
        context = _prompt_text(lm, context)
        whole = context + continuation
        n_cont = _continuation_length(tokenizer, context, whole)
        if n_cont <= 0:
            raise ValueError(f"Empty continuation after tokenisation: {continuation!r}")
        append_eos = requests[i].args[2].get("append_eos", True)
        prepared.append((i, whole, n_cont, append_eos))
    prepared.sort(key=lambda p: -len(p[1]))
    batch_size = lm.batch_size if isinstance(lm.batch_size, int) else 1
    flatten = getattr(lm.config, "model_type", "") == "llava"
    old_side = tokenizer.padding_side
    tokenizer.padding_side = "right"
    try:
        for start in tqdm(range(0, len(prepared), batch_size), desc="Scoring answer tokens (text + image)",
                          disable=lm.rank != 0):
            chunk = prepared[start : start + batch_size]
            images = [_prepare_images(lm, visuals_of(requests[i])) for i, _, _, _ in chunk]
            encoding = lm.processor(
                text=[w for _, w, _, _ in chunk],
                images=[img for group in images for img in group] if flatten else images,
                padding="longest",
                return_tensors="pt",
            )
            ids = encoding.pop("input_ids").to(lm.device)
            mask = encoding.pop("attention_mask").to(lm.device)
            lengths = mask.sum(dim=1).tolist()
            if max(lengths) > lm.max_length:
                raise ValueError(
                    f"A prompt with its images is {max(lengths)} tokens, more than the model's max_length "
                    f"{lm.max_length}; pass a larger max_length in --model_args or smaller images "
                    f"(image_max_side=...)."
                )
            pixels = {k: (v.to(lm.device, lm.model.dtype) if torch.is_floating_point(v) else v.to(lm.device))
                      for k, v in encoding.items() if hasattr(v, "to")}
            with torch.no_grad():
                logits = lm.model(input_ids=ids, attention_mask=mask, **pixels).logits
            spans, targets = [], []
            for row, (_, _, n_cont, append_eos) in enumerate(chunk):
                end = int(lengths[row])
                eos = [lm.eot_token_id] if append_eos else []
                spans.append((end - n_cont - 1, end - 1 + len(eos)))
                targets.append(ids[row, end - n_cont : end].tolist() + eos)
            # float32 statistics for the scored positions only, a few at a time (harness_ext.token_scoring)
            for (i, _, _, _), scores in zip(chunk, score_sequences(logits, spans, targets), strict=True):
                results[i] = scores
            del logits
    finally:
        tokenizer.padding_side = old_side
    return results  # type: ignore[return-value]


def vllm_vlm_answer_logprobs(lm: Any, requests: list, text_path: Callable[[Any, list], list[dict]]) -> list[dict]:
    """``unlearn_answer_logprobs`` on ``vllm-vlm``: prompt log-probs of (context + continuation + EOS) with the images
    as ``multi_modal_data``. vLLM returns only the chosen tokens' log-probs, so no Min-K%++ statistics."""
    results, with_images = _score_text_only(lm, requests, text_path)
    if not with_images:
        return results  # type: ignore[return-value]
    tokenizer = lm.tokenizer
    eos = tokenizer.decode([lm.eot_token_id])
    prompts, n_conts = [], []
    for i in with_images:
        context, continuation = _split_whitespace(*requests[i].args[:2])
        n_conts.append(_continuation_length(tokenizer, context, context + continuation) + 1)
        images = _prepare_images(lm, visuals_of(requests[i]))
        prompts.append({"prompt": context + continuation + eos, "multi_modal_data": {"image": images}})
    # lm-eval's own scoring call (prompt_logprobs=1, one token): with the LoRA adapter, and over the replicas of
    # ``data_parallel_size``
    outputs = lm._multimodal_model_generate(requests=prompts, generate=False)
    for i, out, n in zip(with_images, outputs, n_conts, strict=True):
        lps = []
        for tok, dist in zip(out.prompt_token_ids[-n:], out.prompt_logprobs[-n:], strict=True):
            value = dist[tok]
            lps.append(float(getattr(value, "logprob", value)))
        results[i] = {"logprobs": lps, "vocab_mean": None, "vocab_var": None}
    return results  # type: ignore[return-value]


def generate_until_split(original: Callable, text_generate: Callable) -> Callable:
    """Wrap ``hf-multimodal``'s ``generate_until`` so that a batch mixing text-only and image requests (two tasks of
    one group, e.g. ``clear_forget10_text`` and ``clear_forget10_image``) runs each kind on its own path; lm-eval
    decides by the first request alone."""

    def generate_until(self: Any, requests: list, disable_tqdm: bool = False) -> list[str]:
        text = [i for i, r in enumerate(requests) if not visuals_of(r)]
        images = [i for i, r in enumerate(requests) if visuals_of(r)]
        if not text:
            return original(self, requests, disable_tqdm=disable_tqdm)
        out: list[str | None] = [None] * len(requests)
        text_out = text_generate(self, [_text_only(requests[i]) for i in text], disable_tqdm=disable_tqdm)
        image_out = original(self, [requests[i] for i in images], disable_tqdm=disable_tqdm) if images else []
        for idx, res in [*zip(text, text_out, strict=True), *zip(images, image_out, strict=True)]:
            out[idx] = res
        return out  # type: ignore[return-value]

    generate_until._unlearn_patched = True  # type: ignore[attr-defined]
    return generate_until


def _text_only(request: Any) -> Any:
    """The request with an empty visual argument dropped (lm-eval's text path expects two arguments)."""
    if len(request.args) < 3:
        return request
    import copy

    clone = copy.copy(request)
    clone.arguments = tuple(request.args[:2])
    return clone
