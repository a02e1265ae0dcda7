"""WaterDrum's corpus aggregation (``aggregate.compute``) from records to metrics, against values computed by hand.

The verifier is replaced by a table (generation -> watermark score under each id, counted tokens), so what is
checked is the aggregation alone: token-weighted pooling of a query's generations, the query owner's column, the
per-split means, the other-id control, the per-generation AUROC and the three baselines with their NaN rows dropped.
"""

import numpy as np
import pytest

from unlearn_tasks.waterdrum import aggregate
from unlearn_tasks.waterdrum.options import WaterDrumOptions

IDS = [1, 2, 3]
#: generation -> (score under ids 1, 2, 3; counted tokens)
VERIFIED = {
    "a": ([0.2, 0.9, 0.5], 1),
    "b": ([0.6, 0.1, 0.3], 3),
    "c": ([0.4, 0.8, 0.0], 2),
    "d": ([0.0, 0.4, 0.2], 2),
    "e": ([0.3, 0.1, 0.7], 5),
}
NAN = float("nan")


def _record(kind, split, owner, index, gens=(), rouge=NAN, knowmem=NAN, min_k=NAN):
    return {"kind": kind, "split": split, "owner": owner, "index": index, "generations": list(gens),
            "rougeL_recall": rouge, "knowmem": knowmem, "min_k": min_k}


RECORDS = [
    _record("text", "forget", 1, 0, "ab", rouge=0.4, min_k=2.0),
    _record("text", "retain", 2, 1, "cd", rouge=0.8, min_k=3.0),
    _record("text", "retain", 3, 2, "e", min_k=5.0),  # ROUGE NaN: left out of the ROUGE mean
    _record("text", "retain", 3, 3, ""),  # no generations: not a query
    _record("knowmem", "forget", 1, 0, knowmem=0.5),
    _record("knowmem", "retain", 2, 1, knowmem=0.25),
]


@pytest.fixture
def stub_verifier(monkeypatch):
    calls, kwargs = [], {}

    def verify_texts(gens, ids, k_p, tokenizer=None, vocab_size=None, workers=None, return_lengths=False):
        calls.append((list(gens), list(ids), k_p))
        kwargs.update(tokenizer=tokenizer, vocab_size=vocab_size, workers=workers, return_lengths=return_lengths)
        table = [[VERIFIED[g][0][i - 1] if i <= 3 else 0.0 for i in ids] for g in gens]  # ids beyond 3 score 0
        scores = np.array(table, dtype=np.float64)[:, :, None]
        assert return_lengths is True
        return scores, np.array([VERIFIED[g][1] for g in gens])

    monkeypatch.setattr(aggregate, "verify_texts", verify_texts)
    verify_texts.kwargs = kwargs
    return calls


def test_compute_by_hand(stub_verifier):
    metrics, record = aggregate.compute(RECORDS, WaterDrumOptions(), encoder=None, vocab_size=100)
    assert stub_verifier == [(list("abcde"), IDS, 1)]  # one call, every generation, every owner id
    # pooled query scores (token-weighted): q0 = (1*a + 3*b)/4 = [0.5, 0.3, 0.35], q1 = (c + d)/2 = [0.2, 0.6, 0.1],
    # q2 = e = [0.3, 0.1, 0.7]; owner columns: q0 -> id 1, q1 -> id 2, q2 -> id 3
    expected = {
        "forget_strength": 0.5,
        "retain_strength": (0.6 + 0.7) / 2,
        "other_id_strength": ((0.3 + 0.35) / 2 + (0.2 + 0.1) / 2 + (0.3 + 0.1) / 2) / 3,
        # per generation under its owner's id: forget a 0.2, b 0.6; retain c 0.8, d 0.4, e 0.7 -> 5 of 6 pairs
        "waterdrum_auroc": 5 / 6,
        "forget_rougeL_recall": 0.4, "retain_rougeL_recall": 0.8,
        "forget_knowmem": 0.5, "retain_knowmem": 0.25,
        "forget_min_k": 2.0, "retain_min_k": 4.0,
    }
    assert set(metrics) == set(expected) == set(aggregate.metric_names(WaterDrumOptions()))
    for name, value in expected.items():
        assert metrics[name] == pytest.approx(value, abs=1e-12), name
    assert record["owner_strengths"] == pytest.approx({"1": 0.5, "2": 0.6, "3": 0.7})
    assert record["queries"]["tokens"] == [4, 4, 5]
    assert np.allclose(record["queries"]["scores_all_ids"], [[0.5, 0.3, 0.35], [0.2, 0.6, 0.1], [0.3, 0.1, 0.7]])
    assert record["generations"]["score"] == pytest.approx([0.2, 0.6, 0.8, 0.4, 0.7])
    assert record["baselines"]["rougeL_recall"]["value"] == [0.4, 0.8]
    assert record["forget_owners"] == [1] and record["retain_owners"] == [2, 3]


def test_parts_and_ids(stub_verifier):
    opts = WaterDrumOptions(parts=["watermark"], ids="1-4")
    metrics, record = aggregate.compute(RECORDS, opts, encoder=None, vocab_size=100)
    assert stub_verifier[0][1] == [1, 2, 3, 4] and record["ids"] == [1, 2, 3, 4]
    assert set(metrics) == {"forget_strength", "retain_strength", "other_id_strength", "waterdrum_auroc"}
    # a fourth id (scoring 0) enters the other-id control only: mean over the three ids other than the owner's
    assert metrics["other_id_strength"] == pytest.approx(((0.3 + 0.35) / 3 + (0.2 + 0.1) / 3 + (0.3 + 0.1) / 3) / 3)
    assert metrics["forget_strength"] == pytest.approx(0.5) and metrics["retain_strength"] == pytest.approx(0.65)
    with pytest.raises(ValueError, match=r"owner ids \[3\]"):
        aggregate.compute(RECORDS, WaterDrumOptions(ids="1-2"), encoder=None, vocab_size=100)


def test_single_id_has_no_other_id_control(stub_verifier):
    only_owner_1 = [r for r in RECORDS if r["owner"] == 1]
    metrics, _ = aggregate.compute(only_owner_1, WaterDrumOptions(), encoder=None, vocab_size=100)
    assert np.isnan(metrics["other_id_strength"]) and np.isnan(metrics["retain_strength"])
    assert np.isnan(metrics["waterdrum_auroc"])  # no retain generation
    assert metrics["forget_strength"] == pytest.approx(0.2 * 1 / 4 + 0.6 * 3 / 4)


class _Encoder:
    name = "stub-encoder"


def test_the_whole_record(stub_verifier, monkeypatch):
    opts = WaterDrumOptions(benchmark="tofu", config="forget_05", k_p=2, workers=3, generations=2)
    metrics, record = aggregate.compute(RECORDS, opts, encoder=_Encoder(), vocab_size=100)
    assert stub_verifier[0][2] == 2
    kwargs = aggregate.verify_texts.kwargs
    assert isinstance(kwargs.pop("tokenizer"), _Encoder) and kwargs == {"vocab_size": 100, "workers": 3,
                                                                      "return_lengths": True}
    assert list(metrics) == ["retain_strength", "forget_strength", "other_id_strength", "waterdrum_auroc",
                             "forget_rougeL_recall", "retain_rougeL_recall", "forget_knowmem", "retain_knowmem",
                             "forget_min_k", "retain_min_k"]
    queries = record.pop("queries")
    assert queries["split"] == ["forget", "retain", "retain"] and queries["owner"] == [1, 2, 3]
    assert queries["index"] == [0, 1, 2] and queries["tokens"] == [4, 4, 5]
    assert queries["score"] == pytest.approx([0.5, 0.6, 0.7])
    generations = record.pop("generations")
    assert generations["query"] == [0, 0, 1, 1, 2] and generations["tokens"] == [1, 3, 2, 2, 5]
    baselines = record.pop("baselines")
    assert baselines["min_k"] == {"split": ["forget", "retain", "retain"], "owner": [1, 2, 3], "value": [2.0, 3.0, 5.0]}
    assert baselines["knowmem"] == {"split": ["forget", "retain"], "owner": [1, 2], "value": [0.5, 0.25]}
    assert record.pop("owner_strengths") == pytest.approx({"1": 0.5, "2": 0.6, "3": 0.7})
    assert record.pop("metrics") == pytest.approx(metrics)
    assert record == {
        "format": "lm-eval-unlearning/waterdrum/1", "benchmark": "tofu", "dataset_path": "Glow-AI/WaterDrum-TOFU",
        "config": "forget_05", "ids": [1, 2, 3], "k_p": 2, "vocab_size": 100, "verify_tokenizer": "stub-encoder",
        "generations_per_query": 2, "forget_strength": pytest.approx(0.5), "retain_strength": pytest.approx(0.65),
        "forget_owners": [1], "retain_owners": [2, 3]}
    # an encoder without a name is recorded as its str()
    assert aggregate.compute(RECORDS, opts, encoder="tok", vocab_size=100)[1]["verify_tokenizer"] == "tok"


def test_no_generation_at_all(stub_verifier):
    import warnings

    empty = [_record("text", "forget", 1, 0), _record("knowmem", "retain", 2, 0, knowmem=0.5)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NaN decided here, not numpy's "Mean of empty slice"
        metrics, record = aggregate.compute(empty, WaterDrumOptions(), encoder=None, vocab_size=100)
    assert stub_verifier == []  # nothing to verify: the verifier is not called
    assert all(np.isnan(metrics[m]) for m in ("forget_strength", "retain_strength", "other_id_strength",
                                              "waterdrum_auroc", "forget_knowmem", "forget_min_k"))
    assert metrics["retain_knowmem"] == 0.5
    assert record["ids"] == [] and record["owner_strengths"] == {}
    assert record["queries"] == {"split": [], "owner": [], "index": [], "score": [], "tokens": [], "scores_all_ids": []}
    assert record["generations"] == {"query": [], "score": [], "tokens": []}


def test_metric_names_order_and_parts():
    opts = WaterDrumOptions(splits=["semantic_duplicate", "retain", "exact_duplicate", "forget"], duplicate_owner=0,
                            parts=["watermark", "mia"])
    assert aggregate.metric_names(opts) == [
        "forget_strength", "retain_strength", "exact_duplicate_strength", "semantic_duplicate_strength",
        "other_id_strength", "waterdrum_auroc", "forget_min_k", "retain_min_k"]
