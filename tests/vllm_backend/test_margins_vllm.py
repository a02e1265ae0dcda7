"""The margins task on lm-eval's vllm backend (margin = log p - log(1 - p) of the chosen token's log-prob) gives the
hf backend's margins (computed from the logits) on the same tiny model. The untrained model keeps p far from 1,
where a float32 log-prob determines the margin precisely."""

import numpy as np

from harness_ext.evaluate import run_lm_eval
from unlearn_tasks.margins.ensemble import RESULTS_KEY

TASK = "margins_tofu_forget01"


def test_vllm_margins_match_hf(tiny_model_dir, demo_data_dir, tmp_path):
    meta = {"data_dir": str(demo_data_dir), "keep_token_margins": True}
    hf = run_lm_eval(tiny_model_dir, [TASK], tmp_path / "hf", meta, backend="hf")["configs"][TASK][RESULTS_KEY]
    vl = run_lm_eval(tiny_model_dir, [TASK], tmp_path / "vllm", meta, backend="vllm")["configs"][TASK][RESULTS_KEY]
    assert hf["sample_hash"] == vl["sample_hash"] and hf["splits"] == vl["splits"]
    assert hf["n_tokens"] == vl["n_tokens"]
    np.testing.assert_allclose(vl["margins"], hf["margins"], atol=1e-3)
    for a, b in zip(hf["token_margins"], vl["token_margins"], strict=True):
        np.testing.assert_allclose(b, a, atol=2e-3)
