"""The request type ``unlearn_answer_logprobs``: per-token log-probabilities of a continuation.

Per request: the log-probabilities of the continuation's tokens with EOS appended (as TOFU scores answers), the
per-token margins ``z_y - logsumexp_{v != y} z_v`` (for KLoM; on vLLM from the chosen-token log-prob as
``log p - log(1 - p)``), whether each token is the model's argmax (``argmax_match``, for exact memorization and
extraction strength; on vLLM from the top-1 prompt log-prob), the scored ids without the first one decoded (``decoded_tail``, for the zlib attack under
TOFU's answer boundary) plus, on the ``hf`` backend, the mean and variance of the log-probabilities under the
model's next-token distribution at each position (for Min-K%++), computed a few positions at a time by
:mod:`harness_ext.token_scoring`. An optional third argument (a dict) lets a task give the token ids itself
(``context_ids`` / ``continuation_ids``: a release's own tokenisation) and switch the EOS off
(``append_eos: False``), or score a text as a model's loss on it alone does (``own_tokens: True``: the tokenizer's
own ids of the continuation, special tokens included, the first one as the context), or give the chat conversation
whose last turn is the answer (``conversation``: the ids open-unlearning scores in a chat template,
:mod:`harness_ext.chat_tokens`; the result then says ``ou_labels: True``). Implemented for ``hf`` and ``vllm`` (and subclasses); image-conditioned requests on
``hf-multimodal`` and ``vllm-vlm`` go to :mod:`harness_ext.multimodal`; other backends get a clear error.
"""

from __future__ import annotations

import math
from typing import Any

from harness_ext.chat_tokens import encode_conversation, ou_attention_mask, uses_ou_mask
from harness_ext.lm_eval_patches import hf_batch_size, is_backend, request_options

ANSWER_LOGPROBS = "unlearn_answer_logprobs"


def _encode(lm: Any, context: str, continuation: str) -> tuple[list[int], list[int]]:
    if context == "":
        return [lm.prefix_token_id], lm.tok_encode(continuation, add_special_tokens=False)
    return lm._encode_pair(context, continuation)


def encode_request(lm: Any, req: Any) -> tuple[list[int], list[int]]:
    """(context ids, scored ids) of an ``unlearn_answer_logprobs`` request: lm-eval's own split of the two strings,
    or the ids the task gave (``context_ids`` / ``continuation_ids``), EOS appended unless ``append_eos`` is False;
    or, for a ``conversation`` (lm-eval's chat-template prompt as context), open-unlearning's chat tokens with their
    own EOS rule (:func:`harness_ext.chat_tokens.encode_conversation`)."""
    options = request_options(req)
    if "conversation" in options:
        return encode_conversation(lm, req.args[0], options["conversation"])
    if "continuation_ids" in options:
        ctx_enc = list(options.get("context_ids") or []) or [lm.prefix_token_id]
        cont_enc = list(options["continuation_ids"])
    elif options.get("own_tokens"):  # a model's loss on the text alone: its own ids, the first one unscored
        ids = list(lm.tokenizer(req.args[1]).input_ids)
        ctx_enc, cont_enc = ids[:1], ids[1:]
    else:
        ctx_enc, cont_enc = _encode(lm, *req.args[:2])
    if options.get("append_eos", True):
        cont_enc = list(cont_enc) + [lm.eot_token_id]
    return list(ctx_enc), list(cont_enc)


def _label_fields(lm: Any, req: Any, cont_enc: list[int]) -> dict[str, Any]:
    """The fields besides the statistics: ``decoded_tail``, the text open-unlearning's zlib attack compresses (its
    labels decoded with special tokens skipped: the scored ids without the first, hidden by TOFU's answer boundary;
    for a ``conversation`` request all of them, which are its labels, flagged ``ou_labels``)."""
    if "conversation" in request_options(req):
        return {"decoded_tail": lm.tokenizer.decode(cont_enc, skip_special_tokens=True), "ou_labels": True}
    return {"decoded_tail": lm.tokenizer.decode(cont_enc[1:], skip_special_tokens=True)}


def _keeps_tail(lm: Any) -> bool:
    """Whether the output layer can run on the scored positions only: the model takes ``logits_to_keep`` and the
    backend's own ``_model_call`` is lm-eval's."""
    import inspect

    from lm_eval.models.huggingface import HFLM

    return (type(lm)._model_call is HFLM._model_call
            and "logits_to_keep" in inspect.signature(type(lm.model).forward).parameters)


def _scored_logits(lm: Any, batch: Any, mask: Any, first: int, keeps_tail: bool) -> tuple[Any, int]:
    """The logits of ``batch`` (``mask``: an attention mask, or None) from position ``first`` on, and that first
    position: the model's output layer runs on the positions that are scored only (``logits_to_keep``) where
    ``keeps_tail`` (:func:`_keeps_tail`); otherwise every position's logits and 0."""
    import torch

    model = lm.model
    if not keeps_tail:
        if mask is None:
            return lm._model_call(batch), 0
        with torch.no_grad():
            return model(batch, attention_mask=mask).logits, 0
    dtype = getattr(lm, "mixed_precision_dtype", None)
    with torch.no_grad(), torch.autocast(device_type=lm.device.type, dtype=dtype, enabled=dtype is not None):
        kept = batch.shape[1] - first
        return model(batch, attention_mask=mask, logits_to_keep=kept).logits, first


def hf_answer_logprobs(lm: Any, requests: list) -> list[dict]:
    """The ``hf`` implementation: one forward pass per batch, longest first."""
    import torch
    from tqdm import tqdm

    from harness_ext.token_scoring import score_sequences

    if getattr(lm, "backend", "causal") != "causal":
        raise NotImplementedError("TOFU answer scoring supports causal language models only.")
    encoded = [encode_request(lm, req) for req in requests]
    order = sorted(range(len(encoded)), key=lambda i: -(len(encoded[i][0]) + len(encoded[i][1])))
    batch_size = hf_batch_size(lm)
    keeps_tail = _keeps_tail(lm)
    results: list[dict | None] = [None] * len(encoded)
    for start in tqdm(range(0, len(order), batch_size), desc="Scoring answer tokens", disable=lm.rank != 0):
        idx = order[start : start + batch_size]
        rows, n_conts = [], []
        for i in idx:
            ctx_enc, cont_enc = encoded[i]
            full = (ctx_enc + cont_enc)[-(lm.max_length + 1) :][:-1]
            rows.append(full)
            n_conts.append(min(len(cont_enc), len(full)))
        width = max(len(r) for r in rows)
        batch = torch.zeros((len(rows), width), dtype=torch.long, device=lm.device)
        for r, row in enumerate(rows):
            batch[r, : len(row)] = torch.tensor(row, dtype=torch.long)
        spans = [(len(row) - n, len(row)) for row, n in zip(rows, n_conts, strict=True)]
        targets = [encoded[i][1][-n:] for i, n in zip(idx, n_conts, strict=True)]
        # The float32 log-softmax and its statistics are computed for the scored positions only, a few at a
        # time, reading the model's logits in place: no [B, T, V] float32 tensor.
        ou_rows = [uses_ou_mask(request_options(requests[i])) for i in idx]
        mask = None
        if any(ou_rows):  # open-unlearning's attention mask on its chat tokens (pad-token positions hidden)
            mask = torch.zeros_like(batch)
            for r, (row, ou) in enumerate(zip(rows, ou_rows, strict=True)):
                mask[r, : len(row)] = torch.tensor(ou_attention_mask(lm.tokenizer, row) if ou else [1] * len(row))
        logits, first = _scored_logits(lm, batch, mask, min(start for start, _ in spans), keeps_tail)
        spans = [(start - first, end - first) for start, end in spans]
        for i, scores in zip(idx, score_sequences(logits, spans, targets), strict=True):
            results[i] = {**scores, **_label_fields(lm, requests[i], encoded[i][1])}
        del logits
    return results  # type: ignore[return-value]


def _is_top1(token: int, dist: dict) -> float:
    """1.0 if ``token`` is the most likely token of a vLLM prompt-logprobs entry (which holds the chosen token and
    the top-1 token, lm-eval asking for ``prompt_logprobs=1``), by vLLM's rank where it gives one, else 0.0."""
    value = dist[token]
    rank = getattr(value, "rank", None)
    if rank is not None:
        return 1.0 if rank == 1 else 0.0
    best = max(float(getattr(v, "logprob", v)) for v in dist.values())
    return 1.0 if float(getattr(value, "logprob", value)) >= best else 0.0


def vllm_answer_logprobs(lm: Any, requests: list) -> list[dict]:
    """The ``vllm`` implementation: prompt log-probs of (context + continuation + EOS)."""
    max_ctx = lm.max_length - 1
    inputs, n_conts = [], []
    for req in requests:
        ctx_enc, cont_enc = encode_request(lm, req)
        full = (ctx_enc + cont_enc)[-max_ctx:]
        inputs.append(full)
        n_conts.append(min(len(cont_enc), len(full) - 1))
    outputs = lm._model_generate(requests=inputs, generate=False)
    results = []
    for req, out, full, n in zip(requests, outputs, inputs, n_conts, strict=True):
        lps, matches = [], []
        for tok, dist in zip(full[-n:], out.prompt_logprobs[-n:], strict=True):
            value = dist[tok]
            lps.append(float(getattr(value, "logprob", value)))
            matches.append(_is_top1(tok, dist))
        # vLLM returns only the chosen tokens' log-probs, not the whole distribution: no Min-K%++ statistics;
        # the margin is log p - log(1 - p), the same quantity as z_y - logsumexp of the others.
        margins = [lp - math.log(-math.expm1(lp)) if lp < 0 else math.inf for lp in lps]
        results.append({"logprobs": lps, "vocab_mean": None, "vocab_var": None, "margins": margins,
                        "argmax_match": matches, **_label_fields(lm, req, full[-n:])})
    return results


def answer_logprobs(self: Any, requests: list) -> list[dict]:
    """``LM.unlearn_answer_logprobs``: per-token log-probs of each (context, continuation + EOS), conditioned on
    the request's images on the multimodal backends (:mod:`harness_ext.multimodal`)."""
    from harness_ext import multimodal

    if is_backend(self, "hf-multimodal"):
        return multimodal.hf_multimodal_answer_logprobs(self, requests, hf_answer_logprobs)
    if is_backend(self, "vllm-vlm"):
        return multimodal.vllm_vlm_answer_logprobs(self, requests, vllm_answer_logprobs)
    if any(multimodal.visuals_of(r) for r in requests):
        raise NotImplementedError(
            f"Answer log-probabilities conditioned on images are implemented for the 'hf-multimodal' and 'vllm-vlm' "
            f"backends; {type(self).__name__} is neither. Run with --model hf-multimodal or --model vllm-vlm."
        )
    if is_backend(self, "hf"):
        return hf_answer_logprobs(self, requests)
    if is_backend(self, "vllm"):
        return vllm_answer_logprobs(self, requests)
    raise NotImplementedError(
        f"The TOFU tasks need per-token answer log-probabilities, which lm-eval-unlearning implements for the "
        f"'hf' and 'vllm' backends (and their subclasses, 'hf-multimodal' and 'vllm-vlm' included); "
        f"{type(self).__name__} is none of them. Run with --model hf or --model vllm."
    )
