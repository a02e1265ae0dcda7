"""The token sequences ``unlearn depth`` scores: one per forget question, with the positions whose next-token
log-probabilities are evaluated (and patched). Three prompt formats:

- ``release``: the UDS release's own (gnueaj/unlearning-depth-score): the prompt ``Question: {q}\\nAnswer: {prefix}``
  encoded with the tokenizer's special tokens, the rest of the answer (a space put in front when neither side has
  one) encoded on its own and appended; with no annotation, the prompt ``Question: {q}\\nAnswer:`` and the whole
  answer.
- ``plain``: the TOFU tasks' plain format (:func:`unlearn_tasks.prompts.encode_qa`).
- ``chat``: the model's chat template as ``unlearn run`` trains in it (:func:`unlearn_tasks.prompts.encode_chat_qa`).

The evaluated tokens are those of the annotated entity (the release's default) when an annotation gives one, else
the whole answer. Logits at position ``p`` predict token ``p + 1``, so the evaluated (and patched) positions
``[start, end)`` are those predicting the span's tokens."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROMPT_FORMATS = ("release", "plain", "chat")


class DepthDataError(ValueError):
    """Data ``unlearn depth`` cannot use; the message says what to fix."""


@dataclass(frozen=True)
class DepthItem:
    """One scored sequence: token ids, the evaluated logit positions ``[start, end)`` and what they cover."""

    index: int
    question: str
    input_ids: tuple[int, ...]
    start: int
    end: int
    span_text: str

    @property
    def labels(self) -> tuple[int, ...]:
        """The evaluated tokens (those predicted at ``start .. end - 1``)."""
        return self.input_ids[self.start + 1 : self.end + 1]


def read_annotations(path: str | Path) -> dict[str, dict]:
    """The release's entity annotations (``tofu_data/forget10_filtered.json``: a list of records with ``question``,
    ``prefix`` and ``entity``), keyed by question."""
    from harness_ext.results import read_json_file

    rows = read_json_file(path, DepthDataError, "entity annotations", "", "give the release's "
                          "tofu_data/forget10_filtered.json (a JSON list of {question, prefix, entity} records)")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise DepthDataError(f"{path}: expected a JSON list of {{question, prefix, entity}} records")
    bad = next((i for i, r in enumerate(rows) if not all(isinstance(r.get(k), str) for k in
                                                          ("question", "prefix", "entity"))), None)
    if bad is not None:
        raise DepthDataError(f"{path}: record {bad} lacks a string question, prefix or entity")
    return {r["question"].strip(): r for r in rows}


def _char_span(text: str, entity: str) -> tuple[int, int] | None:
    """Where the entity is in ``text``: as given, stripped, or with a leading space (the release's three tries)."""
    for candidate in (entity, entity.strip(), " " + entity):
        if candidate and (at := text.find(candidate)) >= 0:
            return at, at + len(candidate)
    return None


def _token_span(tokenizer, ids: list[int], text: str, chars: tuple[int, int], offsets=None) -> tuple[int, int] | None:
    """Token indices of ``ids`` (the encoding of ``text``) overlapping the character range ``chars``: from the
    tokenizer's offsets when given, else from the lengths of the decoded prefixes."""
    if offsets is None:
        ends = [len(tokenizer.decode(ids[: k + 1])) for k in range(len(ids))]
        offsets = list(zip([0, *ends[:-1]], ends))
    hit = [k for k, (a, b) in enumerate(offsets) if b > chars[0] and a < chars[1]]
    return (min(hit), max(hit) + 1) if hit else None


def _release_item(tokenizer, question: str, answer: str, note: dict | None) -> tuple[list[int], list[int], str, tuple]:
    prefix = note["prefix"] if note else None
    prompt = f"Question: {question}\nAnswer:" + (f" {prefix}" if note else "")
    reference = answer[len(prefix):] if note and answer.startswith(prefix) else answer
    if reference and not reference[0].isspace() and not prompt[-1].isspace():
        reference = " " + reference
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=True)
    if getattr(tokenizer, "is_fast", False):
        enc = tokenizer(reference, add_special_tokens=False, return_offsets_mapping=True)
        ref_ids, offsets = enc["input_ids"], enc["offset_mapping"]
    else:
        ref_ids, offsets = tokenizer.encode(reference, add_special_tokens=False), None
    return prompt_ids, ref_ids, reference, offsets


def _template_item(tokenizer, question: str, answer: str, fmt: str, template_args: dict | None):
    from unlearn_tasks.prompts import encode_chat_qa, encode_qa

    if fmt == "plain":
        ids, labels = encode_qa(tokenizer, question, answer)
    else:
        ids, labels = encode_chat_qa(tokenizer, question, answer, template_args=template_args)
    n_prompt = sum(1 for v in labels if v == -100)
    return ids[:n_prompt], ids[n_prompt:], answer.strip(), None


def build_items(tokenizer, records: list[dict], fmt: str = "release", annotations: dict[str, dict] | None = None,
                template_args: dict[str, Any] | None = None) -> tuple[list[DepthItem], list[dict]]:
    """The scored sequences of the forget ``records`` (``question``, ``answer``) and the skipped ones (``index``,
    ``question``, ``reason``): with ``annotations``, questions without one and entities not found in the answer."""
    if fmt not in PROMPT_FORMATS:
        raise DepthDataError(f"unknown prompt format {fmt!r}; choose one of {', '.join(PROMPT_FORMATS)}")
    items, skipped = [], []
    for index, row in enumerate(records):
        question, answer = row["question"], row["answer"]
        note = annotations.get(question.strip()) if annotations is not None else None
        if annotations is not None and note is None:
            skipped.append({"index": index, "question": question, "reason": "no annotation"})
            continue
        if fmt == "release":
            prompt_ids, ans_ids, text, offsets = _release_item(tokenizer, question, answer, note)
        else:
            prompt_ids, ans_ids, _, offsets = _template_item(tokenizer, question, answer, fmt, template_args)
            text = tokenizer.decode(ans_ids)
        target = note["entity"] if note else answer.strip()
        chars = _char_span(text, target)
        if fmt == "release" and note is None:  # the release's whole-answer scope: every reference token
            span = (0, len(ans_ids)) if ans_ids else None
        else:
            span = _token_span(tokenizer, ans_ids, text, chars, offsets) if chars and ans_ids else None
        if span is None:
            skipped.append({"index": index, "question": question, "reason": "span not found in the answer"})
            continue
        base = len(prompt_ids) - 1
        items.append(DepthItem(index, question, tuple(prompt_ids + ans_ids), base + span[0], base + span[1],
                               target))
    return items, skipped
