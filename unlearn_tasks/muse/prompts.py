"""MUSE's prompts: VerbMem continues a raw passage prefix; KnowMem asks a question after few-shot examples."""

from __future__ import annotations

#: KnowMem answers are cut before the first of these (MUSE's post-processing; also lm-eval's ``until``).
KNOWMEM_STOP = ("\n\n", "\nQuestion", "Question:")


def knowmem_prompt(question: str, icl: list[tuple[str, str]]) -> str:
    """Every few-shot pair as ``Question: q\\nAnswer: a\\n\\n``, then ``Question: q\\nAnswer: `` (trailing space kept)."""
    shots = "".join(f"Question: {q}\nAnswer: {a}\n\n" for q, a in icl)
    return f"{shots}Question: {question}\nAnswer: "


def knowmem_messages(question: str, icl: list[tuple[str, str]]) -> list[dict[str, str]]:
    """The same few-shot prompt as chat turns (with ``--apply_chat_template``)."""
    messages = []
    for q, a in icl:
        messages += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    return messages + [{"role": "user", "content": question}]


def cut_at_stop(text: str, stops: tuple[str, ...] = KNOWMEM_STOP) -> str:
    """The text before the earliest stop string (MUSE cuts the answer at each in turn, which is the same)."""
    for stop in stops:
        text = text.split(stop)[0]
    return text


def truncate_reference(tokenizer, text: str, max_tokens: int) -> str:
    """MUSE's VerbMem reference: the first ``max_tokens`` tokens of the true continuation, encoded with special
    tokens (so a Llama BOS counts among them, as in MUSE's code) and decoded without them. (MUSE also asks for
    ``clean_up_tokenization_spaces``, which current transformers ignores for BPE tokenizers such as Llama's.)"""
    ids = tokenizer(text, add_special_tokens=True)["input_ids"][:max_tokens]
    return tokenizer.decode(ids, skip_special_tokens=True)
