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

Used by the ``unlearn_answer_logprobs`` and ``unlearn_answer_gradnorm`` request types for requests that carry a
``conversation`` (the TOFU tasks' ``answer_scoring: tofu`` under ``--apply_chat_template``), rendered with the
keyword arguments lm-eval gives the template (:func:`template_kwargs`: lm-eval's ``chat_template_args`` model
argument); training builds the same tokens with :func:`encode_chat_qa`.
"""

from __future__ import annotations

from typing import Any

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
    concatenation and its labels -100 over the context. The strings are used as given (open-unlearning does not
    strip them)."""
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
    backend's template arguments, split by :func:`split_conversation`."""
    text = render_chat(lm.tokenizer, conversation, False, **template_kwargs(lm))
    return split_conversation(lm.tokenizer, prompt_text, text)


__all__ = ["encode_chat_qa", "encode_conversation", "render_chat", "split_conversation", "template_kwargs"]
