"""The request type ``unlearn_answer_gradnorm``: the gradient norm of an answer's loss over the model's parameters
(the GradNorm membership-inference attack, Zhang et al. 2024, as open-unlearning's ``mia/gradnorm.py``).

Per request (context, continuation[, options]): the loss is minus the mean log-probability of the continuation's
tokens with EOS appended (as ``unlearn_answer_logprobs`` scores them), restricted by ``options``: ``skip_first``
(TOFU's answer boundary) and ``drop_eos`` (open-unlearning's token-wise statistics drop the last labelled token);
one backward pass per answer (batch size 1, as open-unlearning); the result is the mean over the parameters that
received a gradient of each one's ``p``-norm (``options["p"]``: 1, 2 or ``"inf"``; default 2), NaN when no token
is left. ``options["train_mode"]`` switches the model to training mode for the passes, as open-unlearning does.
Afterwards the gradients are freed and the model's mode restored, whatever happens.

Gradients exist on the ``hf`` backend only; every other backend gets a clear error.
"""

from __future__ import annotations

import math
from typing import Any

from harness_ext.answer_logprobs import encode_request
from harness_ext.chat_tokens import ou_attention_mask, uses_ou_mask
from harness_ext.lm_eval_patches import is_backend, request_options

ANSWER_GRADNORM = "unlearn_answer_gradnorm"


def _window(n: int, options: dict) -> slice:
    start = 1 if options.get("skip_first") and n > 1 else 0
    stop = n - 1 if options.get("drop_eos") else n
    return slice(start, stop)


def hf_answer_gradnorm(lm: Any, requests: list) -> list[float]:
    """The ``hf`` implementation (see the module docstring)."""
    import inspect

    import torch
    from tqdm import tqdm

    model = lm.model
    takes_tail = "logits_to_keep" in inspect.signature(type(model).forward).parameters
    was_training = model.training
    results = []
    try:
        for req in tqdm(requests, desc="GradNorm (one backward pass per answer)", disable=lm.rank != 0):
            options = request_options(req)
            p = options.get("p", 2)
            p = math.inf if p in ("inf", math.inf) else float(p)
            model.train(bool(options.get("train_mode", False)))
            ctx_enc, cont_enc = encode_request(lm, req)
            full = (ctx_enc + cont_enc)[-(lm.max_length + 1) :]
            n = min(len(cont_enc), len(full) - 1)
            with torch.enable_grad():
                inputs = torch.tensor([full[:-1]], device=lm.device)
                mask = None
                if uses_ou_mask(options):  # open-unlearning's attention mask on its chat tokens
                    mask = torch.tensor([ou_attention_mask(lm.tokenizer, full[:-1])], device=lm.device)
                tail = {"logits_to_keep": n} if takes_tail else {}  # the output layer on the scored positions only
                logits = model(inputs, attention_mask=mask, **tail).logits[0, -n:]
                targets = torch.tensor(full[-n:], device=lm.device)
                lps = torch.log_softmax(logits.float(), -1).gather(-1, targets[:, None]).squeeze(-1)[_window(n, options)]
                if lps.numel() == 0:
                    results.append(math.nan)
                    continue
                model.zero_grad(set_to_none=True)
                (-lps.mean()).backward()
            norms = [q.grad.detach().float().norm(p=p) for q in model.parameters() if q.grad is not None]
            results.append(float(torch.stack(norms).mean()) if norms else math.nan)
            model.zero_grad(set_to_none=True)
    finally:
        model.zero_grad(set_to_none=True)
        model.train(was_training)
    return results


def answer_gradnorm(self: Any, requests: list) -> list[float]:
    """``LM.unlearn_answer_gradnorm``: per-answer gradient norms on ``hf``; a clear error on any other backend."""
    if is_backend(self, "hf") and not is_backend(self, "hf-multimodal"):
        return hf_answer_gradnorm(self, requests)
    raise NotImplementedError(
        f"The GradNorm membership-inference attack (mia_gradnorm) needs gradients of the model's parameters, which "
        f"lm-eval-unlearning takes on the 'hf' backend only; {type(self).__name__} is not it. Run with --model hf, "
        f"or leave mia_gradnorm out of --metadata."
    )
