"""The package's tasks on lm-eval's vllm backend give the hf backend's numbers (greedy decoding, same tiny model,
float32): TOFU and a task of each request kind of the data-transformation formats (multiple choice, per-token
cloze probability, generation), compared document by document (tests/fixtures/sample_parity.py) and on the corpus
numbers: ROUGE and accuracies within 0.05 absolute only when a rare near-tie flipped a greedy token or letter (else
within 1e-3), log-likelihood metrics within 1e-3; Min-K%++ is NaN on vLLM by design (no full distribution).
The module's vLLM runs share one engine (an engine start is most of a run on these tiny tasks), built with the model
arguments ``run_lm_eval(..., backend="vllm")`` gives lm-eval; each hf run loads the model as before."""

import math

import pytest

from fixtures.sample_parity import NOT_ON_VLLM, allowed_flips, compare_samples
from harness_ext.evaluate import evaluate_lm, model_arguments, run_lm_eval
from harness_ext.results import task_metrics

TASKS = ["tofu_forget01", "tofu_mcqa", "tofu_cloze", "tofu_comprehension_qa"]
NOT_ON_VLLM_METRICS = {"mia_min_k_plus_plus_auc"}


@pytest.fixture(scope="module")
def memorised(memorised_tiny_dir):
    return memorised_tiny_dir  # tests/conftest.py


@pytest.fixture(scope="module")
def vllm_lm(memorised):
    """lm-eval's vllm backend on the memorised model, as ``run_lm_eval(memorised, ..., backend="vllm")`` builds it
    (its model arguments, batch size 16), once for the module."""
    from lm_eval.models.vllm_causallms import VLLM

    return VLLM(**model_arguments(memorised, "vllm"), batch_size=16)


def _vllm_run(lm, model_dir, tasks, out, metadata, **kwargs):
    """``run_lm_eval(model_dir, tasks, out, metadata, backend="vllm", **kwargs)`` on the module's engine ``lm``: the
    same task metadata (the model arguments under the caller's), the same lm-eval call."""
    model_args = model_arguments(model_dir, "vllm")
    return evaluate_lm(lm, tasks, out, {**model_args, **metadata}, model_args=model_args, **kwargs)


@pytest.fixture(scope="module")
def relu_data_dir(tmp_path_factory):
    from unlearn_methods.scaffolding.tofu_formats_corpus import write_formats

    return write_formats(tmp_path_factory.mktemp("relu_demo"))


@pytest.mark.parametrize("task", TASKS)
def test_vllm_matches_hf(task, memorised, vllm_lm, demo_data_dir, relu_data_dir, tmp_path):
    meta = {"data_dir": str(demo_data_dir), "relu_data_dir": str(relu_data_dir), "relu_pair": "forget01"}
    hf_run = run_lm_eval(memorised, [task], tmp_path / "hf", meta, backend="hf", log_samples=True)
    vl_run = _vllm_run(vllm_lm, memorised, [task], tmp_path / "vllm", meta, log_samples=True)
    # Document by document: the same generations and choices (a greedy near-tie may flip one), every log-prob
    # within float32 noise, and equal per-document records where the generations agree. Margins are left out:
    # near p = 1 (a memorised model) vLLM's log p - log(1 - p) is imprecise; test_margins_vllm.py checks them.
    parity = compare_samples(hf_run["samples"][task], vl_run["samples"][task], NOT_ON_VLLM | {"margins"})
    assert parity.documents > 0 and parity.problems == [], parity.problems[:10]
    assert len(parity.flipped) <= allowed_flips(parity.documents), parity.flipped
    hf, vl = task_metrics(hf_run)[task], task_metrics(vl_run)[task]
    assert set(hf) == set(vl)
    if not parity.flipped:  # identical generations and choices: identical corpus numbers
        for name, value in hf.items():
            if name not in NOT_ON_VLLM_METRICS and not math.isnan(value):
                assert vl[name] == pytest.approx(value, rel=1e-3, abs=1e-4), name
    for name, value in hf.items():
        if name in NOT_ON_VLLM_METRICS:
            assert math.isnan(vl[name])
        elif math.isnan(value):
            assert math.isnan(vl[name]), name
        elif ("rouge" in name or name == "model_utility" or "acc" in name or name == "forget_retain_gap"
              or name in ("extraction_strength", "exact_memorization")):
            # a rare near-tie may flip one greedy token, one letter choice or one argmax (vLLM's top-1 rank)
            assert vl[name] == pytest.approx(value, abs=0.05), name
        else:
            assert vl[name] == pytest.approx(value, rel=1e-3, abs=1e-4), name


def test_sampled_decoding_is_sensible(memorised, vllm_lm, demo_data_dir, tmp_path):
    """With temperature 1 sampling, a memorised model still recalls most answers."""
    res = _vllm_run(vllm_lm, memorised, ["tofu_forget01_rouge"], tmp_path, {"data_dir": str(demo_data_dir)},
                    gen_kwargs="do_sample=True,temperature=1.0")
    rouge = task_metrics(res)["tofu_forget01_rouge"]
    assert 0.3 < rouge["retain_rougeL_recall"] <= 1.0
