"""open-unlearning's chat tokens: a question and its answer inside a model's chat template, tokenised as
open-unlearning's ``preprocess_chat_instance`` does with ``apply_chat_template: True`` (re-implemented, not copied).

The rule, for a conversation ``[system?, user, assistant]``:

1. the prompt (every turn but the answer, then the template's generation prompt) and the whole conversation (the
   answer as the assistant turn, closed by the template's own end-of-turn tokens) are each rendered by the chat
   template with the same keyword arguments (``date_string`` for Llama-3 templates) and tokenised as
   ``apply_chat_template(tokenize=True)`` does: no special tokens added (the template writes them);
2. EOS is appended when the conversation's last token is not EOS (SmolLM2's template ends in ``<|im_end|>\\n``,
   so EOS follows the newline; Llama-3's ends in ``<|eot_id|>``, its EOS, so nothing is appended);
3. the scored tokens (open-unlearning's labels) are the conversation's tokens after as many as the prompt has; the
   model reads the conversation's own tokens before them.
4. the model reads them under open-unlearning's attention mask (:func:`ou_attention_mask`): every position holding
   the pad token is hidden, end-of-turn tokens included when the pad token is the end of turn.

Used by the ``unlearn_answer_logprobs`` and ``unlearn_answer_gradnorm`` request types for requests that carry a
``conversation`` (the TOFU tasks' ``answer_scoring: tofu`` under ``--apply_chat_template``), rendered with the
keyword arguments lm-eval gives the template (:func:`template_kwargs`: lm-eval's ``chat_template_args`` model
argument); training builds the same tokens with :func:`encode_chat_qa`.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)

Messages = list[dict[str, str]]


def render_chat(tokenizer: Any, messages: Messages, add_generation_prompt: bool, **kwargs: Any) -> str:
    """The chat template's text for ``messages`` (``kwargs`` reach the template, e.g. ``date_string``). As lm-eval
    renders its prompts: a template that rejects the system turn is rendered without it."""
    import jinja2

    def render(turns: Messages) -> str:
        return tokenizer.apply_chat_template(turns, tokenize=False, add_generation_prompt=add_generation_prompt,
                                             **kwargs)

    try:
        return render(messages)
    except jinja2.exceptions.TemplateError:
        return render([m for m in messages if m["role"] != "system"])


def split_conversation(tokenizer: Any, prompt_text: str, conversation_text: str) -> tuple[list[int], list[int]]:
    """(the ids the model reads before the answer, the scored ids) of a rendered prompt and conversation, by the
    rule of the module docstring (steps 1-3)."""
    prompt_ids = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    ids = list(tokenizer(conversation_text, add_special_tokens=False)["input_ids"])
    if not ids or ids[-1] != tokenizer.eos_token_id:
        ids.append(tokenizer.eos_token_id)
    return ids[: len(prompt_ids)], ids[len(prompt_ids):]


def encode_chat_qa(tokenizer: Any, question: str, answer: str, system_prompt: str | None = None,
                   **kwargs: Any) -> tuple[list[int], list[int]]:
    """(context ids, scored ids) of one question and answer in the tokenizer's chat template, with an optional
    system turn and template keyword arguments (``date_string=...``): training's ``input_ids`` are their
    concatenation, its labels -100 over the context, its attention mask :func:`ou_attention_mask` of them (as
    open-unlearning's collator builds it). The strings are used as given (open-unlearning does not strip them)."""
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    prompt = [*system, {"role": "user", "content": question}]
    conversation = [*prompt, {"role": "assistant", "content": answer}]
    return split_conversation(tokenizer, render_chat(tokenizer, prompt, True, **kwargs),
                              render_chat(tokenizer, conversation, False, **kwargs))


def template_kwargs(lm: Any) -> dict[str, Any]:
    """The keyword arguments an lm-eval backend gives the chat template when it renders a prompt (lm-eval 0.4.13:
    ``chat_template_args`` on ``hf``; on ``vllm`` also its ``hf_chat_template`` and ``enable_thinking``)."""
    kwargs = dict(getattr(lm, "chat_template_args", None) or {})
    if hasattr(lm, "hf_chat_template"):
        kwargs = {"chat_template": lm.hf_chat_template, "enable_thinking": getattr(lm, "enable_thinking", None),
                  **kwargs}
    return kwargs


def encode_conversation(lm: Any, prompt_text: str, conversation: Messages) -> tuple[list[int], list[int]]:
    """(context ids, scored ids) of a request whose ``prompt_text`` lm-eval rendered from ``conversation[:-1]``
    (the prompt it also generates from) and whose answer is ``conversation[-1]``: the conversation rendered with the
    backend's template arguments, split by :func:`split_conversation`. The first time per backend, a warning if the
    backend's generation adds a token to the prompt that open-unlearning's does not (:func:`check_generation_prompt`)."""
    if id(lm) not in _CHECKED:
        _CHECKED.add(id(lm))
        check_generation_prompt(lm, prompt_text)
    text = render_chat(lm.tokenizer, conversation, False, **template_kwargs(lm))
    return split_conversation(lm.tokenizer, prompt_text, text)


_CHECKED: set[int] = set()


def check_generation_prompt(lm: Any, prompt_text: str) -> bool:
    """Whether the backend tokenises a chat prompt for generation as open-unlearning does (no special token added:
    lm-eval adds the tokenizer's BOS when the template does not start with it, e.g. a Llama-2-style tokenizer under
    a template without ``<s>``); logs a warning naming the fix (``add_bos_token=False``) when not."""
    encode = getattr(lm, "tok_batch_encode", None)
    ours = encode([prompt_text])[0][0].tolist() if encode else list(lm.tok_encode(prompt_text))
    theirs = lm.tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    if ours == theirs:
        return True
    log.warning(
        "lm-eval tokenises the chat prompt for generation as %d tokens, open-unlearning as %d (the template does not "
        "write the special tokens the tokenizer adds, e.g. its BOS), so ROUGE may differ from its numbers; pass "
        "add_bos_token=False in --model_args to generate from open-unlearning's prompt tokens.", len(ours), len(theirs))
    return False


def ou_attention_mask(tokenizer: Any, ids: list[int]) -> list[int]:
    """open-unlearning's attention mask for a row of its chat tokens: its collator masks every position whose id is
    the pad token (the tokenizer's, EOS when it has none), padding or not. Chat templates whose end of turn is that
    token (SmolLM2's ``<|im_end|>``; Llama-3's ``<|eot_id|>``, the EOS open-unlearning pads with) therefore hide
    every end of turn from the positions after it; its numbers are computed so, and reproduced here."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return [0 if t == pad else 1 for t in ids]


def uses_ou_mask(options: dict) -> bool:
    """Whether a request's options ask for :func:`ou_attention_mask`: a ``conversation`` request, unless its
    ``ou_mask`` is false (the task's choice)."""
    return "conversation" in options and bool(options.get("ou_mask", True))


__all__ = ["check_generation_prompt", "ou_attention_mask", "uses_ou_mask", "encode_chat_qa", "encode_conversation", "render_chat", "split_conversation",
           "template_kwargs"]
