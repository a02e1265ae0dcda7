"""MUSE on lm-eval's vllm backend gives the hf backend's numbers on a memorised tiny model (greedy, float32):
VerbMem / KnowMem within 0.05 (a rare near-tie may flip a greedy token), the MIA AUROCs within 1e-3; Min-K%++ is
NaN on vLLM by design (no full distribution)."""

import math

import pytest

from fixtures.muse import memorise
from harness_ext.evaluate import run_lm_eval
from harness_ext.results import task_metrics


def test_muse_news_vllm_matches_hf(muse_tiny_model_dir, muse_data_dir, tmp_path):
    model = memorise(muse_tiny_model_dir, tmp_path / "memorised")
    meta = {"data_dir": str(muse_data_dir), "verbmem_max_tokens": 32}
    hf = task_metrics(run_lm_eval(model, ["muse_news"], tmp_path / "hf", meta, backend="hf"))["muse_news"]
    vl = task_metrics(run_lm_eval(model, ["muse_news"], tmp_path / "vllm", meta, backend="vllm"))["muse_news"]
    assert set(hf) == set(vl)
    assert hf["forget_verbmem"] > 0.5 and hf["retain_knowmem"] > 0.5  # memorised, so the comparison means something
    assert math.isnan(vl["mia_min_k_plus_plus_auc"]) and math.isnan(hf["privleak"]) and math.isnan(vl["privleak"])
    for name in ("forget_verbmem", "forget_knowmem", "retain_knowmem", "extraction_strength", "exact_memorization"):
        assert vl[name] == pytest.approx(hf[name], abs=0.05), name
    for name in ("mia_loss_auc", "mia_zlib_auc", "mia_min_k_auc"):
        assert vl[name] == pytest.approx(hf[name], rel=1e-3, abs=1e-4), name
