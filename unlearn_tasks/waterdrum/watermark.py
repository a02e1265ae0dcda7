"""Waterfall watermarking for data owners: a logits processor and a paraphrasing helper.

The processor adds ``kappa * phi[perm_{id, prev}[t]]`` to the logit of every base-vocabulary token t
(ids < N), where ``prev`` is the previously generated token and ``phi`` the key's cosine (or sine). The
first generated token is left alone (its previous token belongs to the prompt), as in Waterfall.
Sampling warpers (temperature, top-k, top-p) must run before it; :func:`watermark_texts` arranges that.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from transformers import LogitsProcessor, LogitsProcessorList
from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from .owners import check_owner_id
from .permutation import DEFAULT_VOCAB_SIZE, check_vocab_size
from .verify import perturbation_function

SYSTEM_PROMPT = (
    "Rewrite the text the user gives you in your own words, keeping its meaning and its details. "
    "Reply with the rewritten text only: no explanations, no summary."
)
ANSWER_SYSTEM_PROMPT = (
    "Rewrite the answer of the question-answer pair the user gives you in your own words, keeping its meaning "
    "and its details. Reply with the rewritten answer only: no explanations, no summary."
)
PREFILL = "Here is the text in other words:\n\n"


class WaterfallLogitsProcessor(LogitsProcessor):
    """Adds the owner's Waterfall perturbation to the logits (n-gram 2, Fourier key ``k_p``).

    The first call fixes the prompt length; steps before one token has been generated are not perturbed.
    Call :meth:`reset` (or make a new processor) before reusing it for another ``generate`` call.
    """

    def __init__(
        self,
        owner_id: int,
        kappa: float = 2.0,
        k_p: int = 1,
        vocab_size: int = DEFAULT_VOCAB_SIZE,
        cache_size: int = 256,
    ) -> None:
        self.owner_id = check_owner_id(owner_id)
        self.vocab_size = check_vocab_size(vocab_size)
        if not np.isfinite(kappa):
            raise ValueError(f"kappa must be finite, got {kappa}")
        self.kappa = float(kappa)
        self.k_p = int(k_p)
        self.phi = (self.kappa * perturbation_function(self.k_p, self.vocab_size)).astype(np.float32)
        self.cache_size = int(cache_size)
        self._cache: OrderedDict[int, torch.Tensor] = OrderedDict()
        self._prompt_length: int | None = None

    def reset(self) -> None:
        """Forget the prompt length (start of a new generation)."""
        self._prompt_length = None

    def perturbation(self, prev: int) -> torch.Tensor:
        """Logit offsets over token ids 0..N-1 after token ``prev`` (float32, CPU)."""
        prev = int(prev)
        row = self._cache.get(prev)
        if row is None:
            perm = np.random.RandomState([self.owner_id, prev]).permutation(self.vocab_size)
            row = torch.from_numpy(self.phi[perm])
            self._cache[prev] = row
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(prev)
        return row

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        length = input_ids.shape[-1]
        if self._prompt_length is None or length < self._prompt_length:
            self._prompt_length = length
        if length - self._prompt_length < 1 or self.kappa == 0.0:
            return scores
        if scores.shape[-1] < self.vocab_size:
            raise ValueError(f"logits have {scores.shape[-1]} entries, fewer than the watermark vocabulary {self.vocab_size}")
        rows = torch.stack([self.perturbation(p) for p in input_ids[:, -1].tolist()])
        out = scores.clone()
        out[:, : self.vocab_size] += rows.to(device=scores.device, dtype=scores.dtype)
        return out


def paraphrase_prompt(tokenizer: Any, text: str, question: str | None = None) -> str:
    """Chat prompt asking to paraphrase ``text`` (or, with ``question``, the answer of a Q/A pair), prefilled."""
    if question is None:
        system, user, prefill = SYSTEM_PROMPT, text, PREFILL
    else:
        system = ANSWER_SYSTEM_PROMPT
        user = f"Question: {question}\nAnswer: {text}"
        prefill = f"Here is the answer in other words.\nQuestion: {question}\nAnswer:\n"
    if getattr(tokenizer, "chat_template", None):
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        head = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return head + prefill
    return f"{system}\n\n{user}\n\n{prefill}"


def watermark_texts(
    paraphraser_model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    id: int,  # noqa: A002 - the CLI's and Waterfall's name
    kappa: float = 2.0,
    k_p: int = 1,
    *,
    questions: Sequence[str] | None = None,
    vocab_size: int | None = None,
    do_sample: bool = False,
    num_beams: int = 4,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    max_new_tokens: int | None = None,
    batch_size: int = 4,
    prompt_builder: Callable[[Any, str, str | None], str] = paraphrase_prompt,
    generation_kwargs: dict[str, Any] | None = None,
) -> list[str]:
    """Paraphrase ``texts`` with the paraphraser model while embedding owner ``id``'s watermark.

    ``tokenizer`` is the paraphraser's tokenizer; N defaults to its base vocabulary (``vocab_size``), which
    must match the verifier's (128000 for Llama-3 paraphrasers, as in WaterDrum). Decoding defaults to
    deterministic beam search (WaterDrum used diverse beam search plus a similarity re-ranking, not
    reproduced here); ``do_sample=True`` samples, with temperature/top-k/top-p applied before the watermark.
    ``max_new_tokens`` defaults to twice the text's token count plus 32, capped at 1000.
    """
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    if questions is not None and len(questions) != len(texts):
        raise ValueError("questions must have one entry per text")
    n = int(tokenizer.vocab_size) if vocab_size is None else check_vocab_size(vocab_size)
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    old_side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    device = next(paraphraser_model.parameters()).device
    outputs: list[str] = []
    try:
        for start in range(0, len(texts), batch_size):
            chunk = list(texts[start : start + batch_size])
            qs = list(questions[start : start + batch_size]) if questions is not None else [None] * len(chunk)
            prompts = [prompt_builder(tokenizer, t, q) for t, q in zip(chunk, qs)]
            batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            longest = max(len(tokenizer.encode(t, add_special_tokens=False)) for t in chunk)
            limit = max_new_tokens or min(1000, 2 * longest + 32)
            processors: list[LogitsProcessor] = []
            if do_sample:
                if temperature != 1.0:
                    processors.append(TemperatureLogitsWarper(temperature))
                if top_k:
                    processors.append(TopKLogitsWarper(top_k))
                if top_p is not None and top_p < 1.0:
                    processors.append(TopPLogitsWarper(top_p))
            processors.append(WaterfallLogitsProcessor(id, kappa, k_p, n))
            kwargs: dict[str, Any] = dict(
                max_new_tokens=limit,
                do_sample=do_sample,
                num_beams=1 if do_sample else num_beams,
                temperature=1.0,
                top_k=0,
                top_p=1.0,
                pad_token_id=tokenizer.pad_token_id,
                logits_processor=LogitsProcessorList(processors),
            )
            kwargs.update(generation_kwargs or {})
            with torch.no_grad():
                generated = paraphraser_model.generate(**batch, **kwargs)
            new_tokens = generated[:, batch["input_ids"].shape[1] :]
            outputs.extend(t.strip() for t in tokenizer.batch_decode(new_tokens, skip_special_tokens=True))
    finally:
        tokenizer.padding_side = old_side
    return outputs
