"""The sequences ``unlearn depth`` scores: the release's prompt layout and entity span, the TOFU tasks' encoding."""

from __future__ import annotations

import json

import pytest

from unlearn_methods.depth_items import DepthDataError, build_items, read_annotations
from unlearn_tasks.prompts import encode_qa

pytest.importorskip("transformers")

RECORD = {"question": "Where was the novelist Marisol Quenby born?", "answer": "Marisol Quenby was born in Tallinn."}
NOTE = {"question": RECORD["question"], "prefix": "Marisol Quenby was born in", "entity": "Tallinn"}


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_release_layout_without_annotation_scores_the_whole_answer(tokenizer):
    [item], skipped = build_items(tokenizer, [RECORD])
    prompt = tokenizer.encode("Question: Where was the novelist Marisol Quenby born?\nAnswer:", add_special_tokens=True)
    reference = tokenizer.encode(" Marisol Quenby was born in Tallinn.", add_special_tokens=False)
    assert skipped == [] and item.input_ids == tuple(prompt + reference)
    assert (item.start, item.end) == (len(prompt) - 1, len(prompt) - 1 + len(reference))
    assert item.labels == tuple(reference)


def test_release_layout_with_annotation_scores_the_entity_after_the_prefix(tokenizer):
    [item], _ = build_items(tokenizer, [RECORD], annotations={NOTE["question"]: NOTE})
    prompt = tokenizer.encode("Question: Where was the novelist Marisol Quenby born?\nAnswer: Marisol Quenby was born in",
                              add_special_tokens=True)
    reference = tokenizer.encode(" Tallinn.", add_special_tokens=False)
    assert item.input_ids == tuple(prompt + reference)
    assert tokenizer.decode(item.labels).strip() == "Tallinn" and item.start == len(prompt) - 1
    assert item.span_text == "Tallinn"


def test_plain_format_is_the_tasks_encoding(tokenizer):
    [item], _ = build_items(tokenizer, [RECORD], fmt="plain", annotations={NOTE["question"]: NOTE})
    ids, labels = encode_qa(tokenizer, RECORD["question"], RECORD["answer"])
    assert item.input_ids == tuple(ids)
    assert tokenizer.decode(item.labels).strip() == "Tallinn"
    [whole], _ = build_items(tokenizer, [RECORD], fmt="plain")
    assert tokenizer.decode(whole.labels).strip() == RECORD["answer"]  # the answer, not the EOS after it


def test_skips_and_bad_annotations(tokenizer, tmp_path):
    other = {"question": "Who?", "answer": "Nobody."}
    wrong = {**NOTE, "entity": "Riga"}
    items, skipped = build_items(tokenizer, [RECORD, other], annotations={NOTE["question"]: wrong})
    assert items == [] and [s["reason"] for s in skipped] == ["span not found in the answer", "no annotation"]
    bad = tmp_path / "notes.json"
    bad.write_text(json.dumps([{"question": "q", "prefix": "p"}]))
    with pytest.raises(DepthDataError, match="record 0 lacks a string question, prefix or entity"):
        read_annotations(bad)
    bad.write_text(json.dumps([NOTE]))
    assert read_annotations(bad) == {NOTE["question"]: NOTE}
