"""The per-document backend comparison of tests/fixtures/sample_parity.py (used by the vLLM stage) on hand-made
samples: it passes equal documents, counts a flipped generation, and reports a number out of tolerance."""

import copy

from fixtures.sample_parity import allowed_flips, compare_samples

NAN = float("nan")


def _sample(doc_id, text="Ada Quill", lps=(-1.0, -2.0), rouge=1.0):
    record = {"split": "forget", "rougeL_recall": rouge, "prob": 0.25, "mia_min_k_plus_plus": 1.2}
    return {"doc_id": doc_id, "metrics": ["forget_rougeL_recall"], "forget_rougeL_recall": record,
            "filtered_resps": [text, {"logprobs": list(lps), "vocab_mean": [-3.0, -3.0], "vocab_var": [1.0, 1.0]},
                               [-4.5, False]]}


def _vllm(sample):
    """What vLLM returns: no next-token distribution statistics, Min-K%++ NaN, float32 noise."""
    s = copy.deepcopy(sample)
    resp = s["filtered_resps"][1]
    resp.update(vocab_mean=None, vocab_var=None, logprobs=[v + 5e-4 for v in resp["logprobs"]])
    s["forget_rougeL_recall"]["mia_min_k_plus_plus"] = NAN
    return s


def test_equal_documents_pass_with_float32_noise_and_vllm_gaps():
    hf = [_sample(0), _sample(1, "Arlow")]
    parity = compare_samples(hf, [_vllm(s) for s in hf])
    assert parity.documents == 2 and parity.flipped == [] and parity.problems == []


def test_a_flipped_generation_is_counted_and_its_record_not_compared():
    hf = [_sample(0), _sample(1)]
    vl = [_vllm(hf[0]), _vllm(_sample(1, "Ada Quil", rouge=0.5))]
    parity = compare_samples(hf, vl)
    assert parity.flipped == ["1"] and parity.problems == []
    flipped_choice = _vllm(hf[0])
    flipped_choice["filtered_resps"][2][1] = True
    assert compare_samples(hf[:1], [flipped_choice]).flipped == ["0"]


def test_numbers_out_of_tolerance_and_missing_documents_are_problems():
    hf = [_sample(0)]
    off = _vllm(hf[0])
    off["filtered_resps"][1]["logprobs"][1] = -2.1
    assert compare_samples(hf, [off]).problems == ["doc 0 responses[1].logprobs[1]: -2.0 vs -2.1"]
    record_off = _vllm(hf[0])  # same responses, another per-document value: a near-tie choice, counted as a flip
    record_off["forget_rougeL_recall"]["prob"] = 0.3
    parity = compare_samples(hf, [record_off])
    assert parity.problems == [] and parity.flipped == ["0"]
    shorter = _vllm(hf[0])
    shorter["filtered_resps"][1]["logprobs"] = [-1.0]
    assert compare_samples(hf, [shorter]).problems == ["doc 0 responses[1].logprobs: 2 vs 1 items"]
    assert compare_samples(hf, [_vllm(_sample(5))]).problems == ["the two backends evaluated different documents"]


def test_allowed_flips():
    assert allowed_flips(4) == 1 and allowed_flips(40) == 2 and allowed_flips(100) == 5
