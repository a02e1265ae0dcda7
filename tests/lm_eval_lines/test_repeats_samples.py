"""lm-eval 0.5's samples of one of lm-eval's own tasks run with ``--repeats`` (its reduced per-document values under
``pass@K(metric)`` keys and the per-repeat scores under ``scores_per_repeat``), as ``leaderboard validate`` reads
them: each reduced key aggregated as its metric is (``gsm8k``'s ``exact_match``: ``mean``), on either lm-eval line.
The lines are written in 0.5's schema (``lm_eval.evaluator_utils._build_logged_samples``); the expected values are
the means of the per-document values below, computed here by hand."""

from __future__ import annotations

import json

import pytest

from unlearn_app.leaderboard.recompute import parse_samples, recompute_task

#: per document: exact_match of each of 4 repeats
REPEATS = [[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1]]


def _pass_at(scores: list[int], k: int) -> float:
    """1 - C(n-c, k) / C(n, k), by hand for n = 4."""
    from math import comb

    n, c = len(scores), sum(scores)
    return 1.0 if n - c < k else 1 - comb(n - c, k) / comb(n, k)


def _line(doc_id: int, scores: list[int]) -> dict:
    reduced = {"exact_match": float(scores[0]), "pass@1(exact_match)": _pass_at(scores, 1),
               "pass@2(exact_match)": _pass_at(scores, 2)}
    return {"doc_id": doc_id, "doc": {"question": f"q{doc_id}", "answer": "#### 1"}, "target": "1",
            "arguments": {"gen_args_0": {"arg_0": "Q", "arg_1": {}}}, "resps": [["1", "2", "3", "1"]],
            "filtered_resps": [["1", "2", "3", "1"]], "filter": "none", "metrics": list(reduced),
            "doc_hash": "0" * 64, "prompt_hash": "0" * 64, "target_hash": "0" * 64, **reduced,
            "scores_per_repeat": {"exact_match": scores}}


def test_reduced_values_of_repeats_are_aggregated_as_their_metric():
    data = "".join(json.dumps(_line(i, s)) + "\n" for i, s in enumerate(REPEATS)).encode()
    rows = parse_samples(data, "samples_gsm8k.jsonl")
    claimed = {"pass@1(exact_match)": 0.0, "pass@2(exact_match)": 0.0, "exact_match": 0.0}
    got = recompute_task("gsm8k", rows, claimed)
    assert not got.unverifiable, got.unverifiable
    assert got.values["exact_match"] == pytest.approx((1 + 0 + 1) / 3)
    assert got.values["pass@1(exact_match)"] == pytest.approx((0.5 + 0 + 1) / 3)
    # pass@2 of [1,0,0,1]: 1 - C(2,2)/C(4,2) = 5/6; the mean with 0 and 1 is not pass@1's
    assert got.values["pass@2(exact_match)"] == pytest.approx((5 / 6 + 0 + 1) / 3)
    assert got.size == 3
