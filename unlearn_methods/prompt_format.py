"""How ``unlearn run`` turns a question-answer pair into training tokens (``--prompt-format``), and the lm-eval
flags that evaluate a checkpoint the same way.

- ``plain``: TOFU's ``Question: ...\\nAnswer:`` prompt (:func:`unlearn_tasks.prompts.encode_qa`), evaluated with
  lm-eval's defaults;
- ``chat``: the question in the model's chat template, with ``--system-prompt`` and the template's keyword
  arguments (``--chat-template-arg date_string="10 Apr 2025"``), exactly as open-unlearning builds its training
  examples (:func:`unlearn_tasks.prompts.encode_chat_qa`), evaluated with ``--apply_chat_template
  --system_instruction ...``;
- ``auto`` (default): ``chat`` when the tokenizer has a chat template, ``plain`` otherwise. Raw-text corpora (MUSE,
  RWKU's text corpus) have no questions and are always trained as plain text; vision-language runs (CLEAR) keep
  the plain prompt their tasks score by default.

In the chat format the attention mask is open-unlearning's by default (``--ou-chat-mask``): its collator sets
``attention_mask = input_ids != pad_token_id``, and where the pad token is the template's end of turn (SmolLM2's
``<|im_end|>``, Llama-3's ``<|eot_id|>`` as pad = EOS) every end-of-turn token is hidden from attention, in training
as in its evaluation (our ``ou_chat_mask`` task option). ``--no-ou-chat-mask`` attends to every token but the padding.

:func:`resolve_prompt_format` replaces ``auto`` by what it means for the run before anything is saved, so the saved
config, the model card and ``--resume`` see the format the run trained in.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from typing import Any

from unlearn_tasks.prompts import encode_chat_qa, encode_qa

FORMATS = ("auto", "plain", "chat")
#: Keywords ``--chat-template-arg`` may not set: the parameters of transformers' ``apply_chat_template`` (the prompt
#: code and lm-eval set ``tokenize``, ``add_generation_prompt``, ``continue_final_message``, ``return_dict`` themselves),
#: the conversation (``messages``) and the tokenizer's special tokens, which the template reads from the tokenizer.
RESERVED_TEMPLATE_ARGS = (
    "conversation", "messages", "tools", "documents", "chat_template", "add_generation_prompt",
    "continue_final_message", "tokenize", "sanitize_control_tokens", "padding", "truncation", "max_length",
    "return_tensors", "return_dict", "return_assistant_tokens_mask", "tokenizer_kwargs",
    "bos_token", "eos_token", "pad_token", "unk_token", "sep_token", "cls_token", "mask_token",
    "additional_special_tokens",
)


def check_template_args(args: dict[str, Any]) -> None:
    """Refuse a ``--chat-template-arg`` key the prompt code or the tokenizer sets itself (ValueError naming it)."""
    reserved = [k for k in args if k in RESERVED_TEMPLATE_ARGS]
    if reserved:
        raise ValueError(f"--chat-template-arg {reserved[0]}=...: {reserved[0]!r} is set by the training and evaluation "
                         "code (or the tokenizer), not a variable of the chat template; leave it out (template "
                         "variables are keys such as date_string).")


@dataclass(frozen=True)
class PromptFormat:
    """A resolved prompt format: plain, or chat with its system prompt and template keyword arguments."""

    chat: bool = False
    system_prompt: str | None = None
    template_args: dict[str, Any] = field(default_factory=dict)
    #: chat only: hide every position holding the pad token from attention, as open-unlearning's collator does
    ou_chat_mask: bool = False

    @property
    def name(self) -> str:
        return "chat" if self.chat else "plain"

    def encode(self, tokenizer, question: str, answer: str, max_length: int | None = None) -> tuple[list[int], list[int]]:
        """Token ids and labels of one QA pair in this format."""
        if self.chat:
            return encode_chat_qa(tokenizer, question, answer, self.system_prompt, self.template_args, max_length)
        return encode_qa(tokenizer, question, answer, max_length)

    def lm_eval_flags(self) -> str:
        """The lm_eval command-line flags that score the model in this format ('' for plain)."""
        if not self.chat:
            return ""
        flags = "--apply_chat_template"
        if self.system_prompt:
            flags += f" --system_instruction {shlex.quote(self.system_prompt)}"
        return flags

    def lm_eval_model_args(self) -> dict[str, Any]:
        """Extra lm-eval model arguments: the template's keyword arguments (``chat_template_args``, read by lm-eval's
        hf backend), if any."""
        return {"chat_template_args": dict(self.template_args)} if self.chat and self.template_args else {}

    def describe(self) -> str:
        """The format in words, for the model card."""
        if not self.chat:
            return "plain (`Question: ...\\nAnswer:`)"
        parts = ["chat template"]
        if self.system_prompt:
            parts.append(f"system prompt {json.dumps(self.system_prompt)}")
        parts += [f"{k}={json.dumps(v)}" for k, v in self.template_args.items()]
        if self.ou_chat_mask:
            parts.append("open-unlearning's attention mask (pad-token positions hidden)")
        return ", ".join(parts)


PLAIN = PromptFormat()


def prompt_format_of(cfg) -> PromptFormat:
    """The :class:`PromptFormat` of a run config whose ``prompt_format`` is resolved (``plain`` or ``chat``)."""
    if cfg.prompt_format == "auto":
        raise ValueError("prompt_format 'auto' is not resolved yet; call resolve_prompt_format(cfg) first.")
    if cfg.prompt_format == "plain":
        return PLAIN
    return PromptFormat(True, cfg.system_prompt, dict(cfg.chat_template_args), bool(cfg.ou_chat_mask))


def trains_on_questions(cfg) -> bool:
    """Whether the run's forget data are question-answer pairs in a text model (the prompt format applies)."""
    source = cfg.source
    return not (source.text or source.vision or source.raw_text(cfg))


def resolve_prompt_format(cfg, tokenizer: Any = None) -> Any:
    """Replace ``cfg.prompt_format`` ``auto`` by ``chat`` (the tokenizer has a chat template) or ``plain``, and
    refuse ``chat`` where it does not apply or the tokenizer has no template (ValueError naming the fix).
    ``tokenizer``: the model's (loaded from ``cfg.model`` when needed and not given). Returns the tokenizer it
    looked at (None when the format needed none), for the run to use rather than load it again."""
    if not trains_on_questions(cfg):
        if cfg.prompt_format == "chat" or cfg.system_prompt is not None or cfg.chat_template_args:
            what = "vision-language data" if cfg.source.vision else "raw text (no questions)"
            raise ValueError(f"--prompt-format chat (and --system-prompt, --chat-template-arg) apply to question-answer "
                             f"data; --data {cfg.data} trains on {what} here. Leave them out.")
        cfg.prompt_format = "plain"
        return None
    if cfg.prompt_format == "plain":
        return tokenizer
    if tokenizer is None:
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(cfg.model)
        except (OSError, ValueError):
            return None  # left unresolved: loading the model reports the problem
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if cfg.prompt_format == "chat" and not has_template:
        raise ValueError(f"--prompt-format chat: the tokenizer of {cfg.model} has no chat template. Use --prompt-format "
                         "plain (or a model with a chat template).")
    if not has_template and (cfg.system_prompt is not None or cfg.chat_template_args):
        raise ValueError(f"--system-prompt and --chat-template-arg apply to the chat format, but the tokenizer of "
                         f"{cfg.model} has no chat template (--prompt-format auto trains it plain). Leave them out.")
    cfg.prompt_format = "chat" if has_template else "plain"
    return tokenizer
