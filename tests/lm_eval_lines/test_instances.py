"""``harness_ext.instances`` on whichever lm-eval line is installed: a request carries its task, document and repeats,
and ``process_results`` gets 0.4.13's shape of responses on both lines, for a document whose requests are repeated
differently (WaterDrum's K samples beside a log-probability request answered once)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness_ext.instances import new_request, responses_per_request, standalone_request
from harness_ext.lm_eval_version import LM_EVAL_05

DOC = {"question": "q", "answer": "a"}


def _task(repeats: int) -> SimpleNamespace:
    return SimpleNamespace(config=SimpleNamespace(task="t", repeats=repeats), instances=[],
                           doc_to_target=lambda doc: doc["answer"])


def _kwargs(doc_id: int, repeats: int) -> dict:
    """What lm-eval passes to ``construct_requests`` on this line."""
    base = {"apply_chat_template": False, "chat_template": None}
    return {**base, "doc_id": doc_id} if LM_EVAL_05 else {**base, "metadata": ("t", doc_id, repeats)}


@pytest.mark.parametrize("override", [None, 1])
def test_a_request_carries_its_task_document_and_repeats(override):
    task = _task(repeats=3)
    request = new_request(task, "generate_until", DOC, ("ctx", {"until": []}), 2, repeats=override,
                          **_kwargs(doc_id=5, repeats=3))
    assert (request.task_name, request.doc_id, request.idx) == ("t", 5, 2)
    assert request.repeats == (3 if override is None else 1)
    assert request.args == ("ctx", {"until": []}) and request.doc is DOC


def test_a_request_of_no_task():
    request = standalone_request("generate_until", ("prompt", {"max_gen_toks": 4}))
    assert request.args == ("prompt", {"max_gen_toks": 4}) and request.request_type == "generate_until"


@pytest.mark.parametrize("take_first", [True, False])
def test_responses_come_back_per_request_on_both_lines(take_first):
    task = _task(repeats=3)
    sampled = new_request(task, "generate_until", DOC, ("c", {}), 0, **_kwargs(0, 3))
    once = new_request(task, "unlearn_answer_logprobs", DOC, ("c", "a"), 1, repeats=1, **_kwargs(0, 3))
    other_doc = new_request(task, "generate_until", {"question": "r"}, ("c", {}), 0, **_kwargs(1, 3))
    task.instances = [once, other_doc, sampled]  # lm-eval's order is not the requests' order
    sampled.resps, once.resps = ["s1", "s2", "s3"], [{"logprobs": [-1.0]}]
    filtered = ["s1"] if take_first and not LM_EVAL_05 else ["s1", "s2", "s3"]  # 0.5's default filter keeps all
    sampled.filtered_resps, once.filtered_resps = {"none": filtered}, {"none": [{"logprobs": [-1.0]}]}
    if LM_EVAL_05:  # every request's filtered responses in one list, in request order
        given = [*sampled.filtered_resps["none"], *once.filtered_resps["none"]]
    else:  # one entry per request: take_first's single response, else the list
        given = ["s1" if take_first else ["s1", "s2", "s3"], {"logprobs": [-1.0]} if take_first else [{"logprobs": [-1.0]}]]
    got = responses_per_request(task, DOC, given, take_first)
    if take_first:
        assert got == ["s1", {"logprobs": [-1.0]}]
    else:
        assert got == [["s1", "s2", "s3"], [{"logprobs": [-1.0]}]]
