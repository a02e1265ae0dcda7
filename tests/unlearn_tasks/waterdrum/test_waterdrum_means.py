"""Every WaterDrum average is the arithmetic mean, on fixtures where the other candidates give other numbers.

Each group below holds three or four values, skewed by one large value, so the mean differs from the median, the
mid-range ((min + max) / 2), the sum and the geometric mean; a group of one or two values (median = mean) cannot
tell them apart. Covered: the split strengths, the other-id control and the owner strengths of
``aggregate.compute``, its three baselines per split, the baselines of a report run (``runs.model_run``) and the
ROUGE-L recall of a document over its generations (``scoring.score_document``). The verifier and ROUGE are
replaced by tables, so only the averaging is under test.
"""

import numpy as np
import pytest

from unlearn_tasks.waterdrum import aggregate, runs, scoring
from unlearn_tasks.waterdrum.options import WaterDrumOptions

NAN = float("nan")
IDS = [1, 2]
#: generation -> its score under ids 1 and 2 (one generation of one counted token per query, so a query's pooled
#: score is its generation's score).
VERIFIED = {
    "f1": (0.1, 0.3), "f2": (0.2, 0.0), "f3": (0.9, 0.6),  # forget, owner 1: own scores 0.1, 0.2, 0.9
    "r1": (0.5, 0.0), "r2": (0.2, 0.1), "r3": (0.1, 0.2), "r4": (0.0, 0.9),  # retain, owner 2: own 0, 0.1, 0.2, 0.9
}
ROUGE = {"f1": 0.0, "f2": 0.1, "f3": 0.5, "r1": 0.2, "r2": 0.3, "r3": 0.4, "r4": 1.0}
MIN_K = {"f1": 1.0, "f2": 2.0, "f3": 6.0, "r1": 4.0, "r2": 4.0, "r3": 5.0, "r4": 11.0}
KNOWMEM = {"forget": [0.0, 0.25, 0.95], "retain": [0.3, 0.4, 0.95]}


def _records() -> list[dict]:
    rows = []
    for i, gen in enumerate(VERIFIED):
        split, owner = ("forget", 1) if gen.startswith("f") else ("retain", 2)
        rows.append({"kind": "text", "split": split, "owner": owner, "index": i, "generations": [gen],
                     "rougeL_recall": ROUGE[gen], "knowmem": NAN, "min_k": MIN_K[gen]})
    for split, values in KNOWMEM.items():
        rows += [{"kind": "knowmem", "split": split, "owner": 1 if split == "forget" else 2, "index": i,
                  "generations": [], "rougeL_recall": NAN, "knowmem": v, "min_k": NAN} for i, v in enumerate(values)]
    return rows


#: metric -> (its mean by hand, its median): every pair differs, and so do mid-range and sum.
EXPECTED = {
    "forget_strength": ((0.1 + 0.2 + 0.9) / 3, 0.2),
    "retain_strength": ((0.0 + 0.1 + 0.2 + 0.9) / 4, 0.15),
    # the other id's column: forget queries under id 2 (0.3, 0, 0.6), retain queries under id 1 (0.5, 0.2, 0.1, 0)
    "other_id_strength": ((0.3 + 0.0 + 0.6 + 0.5 + 0.2 + 0.1 + 0.0) / 7, 0.2),
    "forget_rougeL_recall": ((0.0 + 0.1 + 0.5) / 3, 0.1),
    "retain_rougeL_recall": ((0.2 + 0.3 + 0.4 + 1.0) / 4, 0.35),
    "forget_min_k": ((1.0 + 2.0 + 6.0) / 3, 2.0),
    "retain_min_k": ((4.0 + 4.0 + 5.0 + 11.0) / 4, 4.5),
    "forget_knowmem": ((0.0 + 0.25 + 0.95) / 3, 0.25),
    "retain_knowmem": ((0.3 + 0.4 + 0.95) / 3, 0.4),
}


@pytest.fixture
def table_verifier(monkeypatch):
    def verify_texts(gens, ids, k_p, tokenizer=None, vocab_size=None, workers=None, return_lengths=False):
        scores = np.array([[VERIFIED[g][i - 1] for i in ids] for g in gens], dtype=np.float64)[:, :, None]
        return scores, np.ones(len(gens), dtype=np.int64)

    monkeypatch.setattr(aggregate, "verify_texts", verify_texts)


def test_the_fixture_separates_mean_from_median():
    for name, (mean, median) in EXPECTED.items():
        assert abs(mean - median) > 0.04, name


def test_split_strengths_and_baselines_are_means(table_verifier):
    metrics, record = aggregate.compute(_records(), WaterDrumOptions(), encoder=None, vocab_size=100)
    assert record["ids"] == IDS
    for name, (mean, _) in EXPECTED.items():
        assert metrics[name] == pytest.approx(mean, abs=1e-12), name
    # D1 over the 12 (retain, forget) generation pairs, retain higher = 1, a tie = 1/2: forget 0.1 is below retain
    # 0.2 and 0.9 and ties 0.1 (2.5); forget 0.2 is below 0.9 and ties 0.2 (1.5); forget 0.9 ties 0.9 (0.5)
    assert metrics["waterdrum_auroc"] == pytest.approx((2.5 + 1.5 + 0.5) / 12, abs=1e-12)
    assert record["owner_strengths"] == pytest.approx({"1": EXPECTED["forget_strength"][0],
                                                       "2": EXPECTED["retain_strength"][0]}, abs=1e-12)


def test_report_baselines_are_means(table_verifier):
    _, record = aggregate.compute(_records(), WaterDrumOptions(), encoder=None, vocab_size=100)
    for key, sign in runs.BASELINE_SIGN.items():
        run = runs.model_run("m", record, metric=key)
        assert run.forget == pytest.approx(sign * EXPECTED[f"forget_{key}"][0], abs=1e-12), key
        assert run.retain == pytest.approx(sign * EXPECTED[f"retain_{key}"][0], abs=1e-12), key
    run = runs.model_run("m", record)  # the watermark: the record's split strengths, as they are
    assert (run.forget, run.retain) == (record["forget_strength"], record["retain_strength"])


def test_rouge_of_a_document_is_the_mean_over_its_generations(monkeypatch):
    recalls = {"g1": 0.0, "g2": 0.1, "g3": 0.8}  # mean 0.3, median 0.1, mid-range 0.4
    monkeypatch.setattr(scoring, "rouge_l_recall", lambda reference, text: recalls[text])
    doc = {"kind": "text", "split": "forget", "owner": 1, "index": 0, "id": 0, "reference": "ref"}
    record = scoring.score_document(doc, [list(recalls)], WaterDrumOptions(parts=["watermark", "rouge"]))
    assert record["generations"] == ["g1", "g2", "g3"]
    assert record["rougeL_recall"] == pytest.approx(0.3, abs=1e-12)
