"""How a question becomes model input. Training (unlearn_methods) and evaluation (the lm-eval tasks) both
import this module, so a model is scored on exactly the text it was trained on.

The plain format is TOFU's base-model prompt ``Question: {q}\\nAnswer:`` with the answer continuing after a
space. With lm-eval's ``--apply_chat_template`` the harness wraps the question in the model's chat template
itself; :func:`chat_messages` gives the same turn structure, and :func:`encode_chat_qa` trains inside the chat
template exactly as open-unlearning does.
"""

from __future__ import annotations

from typing import Any

QUESTION_TEMPLATE = "Question: {question}\nAnswer:"
ANSWER_DELIMITER = " "


def question_prompt(question: str) -> str:
    """The plain prompt for a question (no trailing space: the answer carries its leading space)."""
    return QUESTION_TEMPLATE.format(question=question.strip())


def tofu_generation_prompt(prompt: str) -> str:
    """TOFU's exact generation prompt (``...\nAnswer: ``, open-unlearning's QA template): the plain prompt plus the
    space that lm-eval's convention leaves to the answer. On byte-level BPE tokenizers that space is a token of its
    own, so greedy generations differ from those after :func:`question_prompt`."""
    return prompt + ANSWER_DELIMITER


def answer_continuation(answer: str) -> str:
    """The text scored or trained after :func:`question_prompt`."""
    return ANSWER_DELIMITER + answer.strip()


def training_text(question: str, answer: str) -> tuple[str, str]:
    """(prompt, continuation) for one QA pair, as both training and evaluation see it."""
    return question_prompt(question), answer_continuation(answer)


def chat_messages(question: str, answer: str | None = None) -> list[dict[str, str]]:
    """The QA pair as chat turns, for models trained or evaluated with their chat template."""
    messages = [{"role": "user", "content": question.strip()}]
    if answer is not None:
        messages.append({"role": "assistant", "content": answer.strip()})
    return messages


def encode_qa(tokenizer, question: str, answer: str, max_length: int | None = None) -> tuple[list[int], list[int]]:
    """Token ids and labels (-100 on the prompt) of one QA pair, split exactly as lm-eval scores it.

    Like lm-eval's ``_encode_pair``: encode prompt + continuation as one string, take the prompt's own encoding
    length as the boundary, and append EOS (as TOFU does), so training sees the tokens evaluation scores.
    """
    prompt, continuation = training_text(question, answer)
    context = tokenizer.encode(prompt)
    whole = tokenizer.encode(prompt + continuation)
    answer_ids = whole[len(context):] + [tokenizer.eos_token_id]
    input_ids = context + answer_ids
    labels = [-100] * len(context) + answer_ids
    if max_length is not None:
        input_ids, labels = input_ids[:max_length], labels[:max_length]
    return input_ids, labels


def encode_chat_qa(tokenizer, question: str, answer: str, system_prompt: str | None = None,
                   template_args: dict[str, Any] | None = None,
                   max_length: int | None = None) -> tuple[list[int], list[int]]:
    """Token ids and labels of one QA pair inside the tokenizer's chat template, as open-unlearning's
    ``preprocess_chat_instance`` builds them (``apply_chat_template: True``): the conversation [system prompt when
    given and non-empty] + user question + assistant answer rendered and tokenised by the template (its keyword
    arguments ``template_args``, e.g. ``{"date_string": "10 Apr 2025"}``), the prompt part (without the answer,
    with the generation prompt) tokenised the same way; labels -100 on the prompt's length, the rest (answer, the
    template's end-of-turn tokens) labelled, and EOS appended when the conversation does not end with it. Question
    and answer are used as given (no stripping), as open-unlearning does. ``max_length`` truncates (open-unlearning
    does not truncate in this mode; TOFU's pairs are far shorter than its 512)."""
    chat = [{"role": "system", "content": system_prompt}] if system_prompt else []
    chat += [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    kwargs = dict(template_args or {})
    whole = list(tokenizer.apply_chat_template(chat, tokenize=True, add_generation_prompt=False, return_dict=False,
                                               **kwargs))
    prompt = tokenizer.apply_chat_template(chat[:-1], tokenize=True, add_generation_prompt=True, return_dict=False,
                                           **kwargs)
    if whole[-1] != tokenizer.eos_token_id:
        whole.append(tokenizer.eos_token_id)
    labels = [-100] * len(prompt) + whole[len(prompt):]
    if max_length is not None:
        whole, labels = whole[:max_length], labels[:max_length]
    return whole, labels


def encode_text(tokenizer, text: str, max_length: int | None = None) -> list[tuple[list[int], list[int]]]:
    """A raw passage as training examples (MUSE's forget and retain corpora): chunks of at most ``max_length``
    tokens, each the prefix token (BOS, or EOS for tokenizers without one, as lm-eval's ``prefix_token_id``)
    followed by the passage's tokens, all of them labelled. Evaluation scores passages the same way (PrivLeak)."""
    prefix = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    ids = tokenizer.encode(text, add_special_tokens=False)
    step = max(1, (max_length or len(ids) + 1) - 1)
    return [([prefix, *ids[i : i + step]], [-100, *ids[i : i + step]]) for i in range(0, len(ids), step)]
