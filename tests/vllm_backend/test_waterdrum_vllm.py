"""WaterDrum tasks on lm-eval's vllm backend: sampled generations differ from hf's (another random stream), so the
watermark strengths are checked for what they mean (the owners' watermark is found, other ids score about 0);
the deterministic baselines (Min-40% log-probabilities, greedy KnowMem) must equal hf's."""

import math

import pytest

from fixtures import waterdrum as wf
from harness_ext.evaluate import run_lm_eval
from harness_ext.results import task_metrics

TASKS = ("waterdrum_ax", "waterdrum_tofu")


@pytest.fixture(scope="module")
def runs(waterdrum_data, tmp_path_factory):
    meta = wf.metadata(waterdrum_data["data"], waterdrum_data["model"])
    out = {}
    for backend in ("hf", "vllm"):
        res = run_lm_eval(waterdrum_data["model"], list(TASKS), tmp_path_factory.mktemp(backend), meta, backend=backend,
                          gen_kwargs="max_gen_toks=32")
        out[backend] = task_metrics(res)
    return out


@pytest.mark.parametrize("task", TASKS)
def test_watermark_found_on_vllm_and_baselines_match_hf(runs, task):
    hf, vl = runs["hf"][task], runs["vllm"][task]
    assert set(hf) == set(vl)
    assert vl["forget_strength"] > 0.15 and vl["retain_strength"] > 0.15
    assert abs(vl["other_id_strength"]) < 0.1
    for name in ("forget_min_k", "retain_min_k"):
        assert vl[name] == pytest.approx(hf[name], rel=1e-3, abs=1e-4), name
    for name in ("forget_knowmem", "retain_knowmem"):
        if not math.isnan(hf[name]):
            assert vl[name] == pytest.approx(hf[name], abs=0.05), name
