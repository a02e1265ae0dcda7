"""Reference-log parsing, against the TOFU authors' real legacy logs and fixtures in the other formats."""

import json

import numpy as np
import pytest
from scipy import stats

from unlearn_tasks.metrics.tofu import forget_quality, truth_ratio_forget_stat
from unlearn_tasks.tofu.reference import ReferenceLogError, check_items, load_reference


def _legacy_ratios(path):
    data = json.loads(path.read_text())
    return np.array([data["truth_ratio"][k] for k in sorted(data["truth_ratio"], key=int)])


@pytest.mark.parametrize("model", ["phi", "llama2-7b"])
def test_legacy_truth_ratios_recomputed_from_losses_match_the_log(legacy_logs, model):
    path = legacy_logs / f"{model}_full" / "eval_log_forget.json"
    ref = load_reference(path, "forget10")
    assert len(ref.forget_truth_ratios) == 300
    np.testing.assert_allclose(ref.forget_truth_ratios, _legacy_ratios(path), rtol=1e-5)
    assert ref.forget_truth_ratios[0] == pytest.approx(0.1122654, rel=1e-5) if model == "phi" else True


@pytest.mark.parametrize(("model", "expected"), [("phi", 2.194e-16), ("llama2-7b", 1.834e-21)])
def test_forget_quality_full_vs_retain90_legacy(legacy_logs, model, expected):
    full = load_reference(legacy_logs / f"{model}_full", "forget10")
    retain = load_reference(legacy_logs / f"{model}_retain90", "forget10")
    fq = forget_quality(full.forget_truth_ratios, retain.forget_truth_ratios)
    assert fq == pytest.approx(expected, rel=1e-3)
    assert fq == pytest.approx(stats.ks_2samp(full.forget_truth_ratios, retain.forget_truth_ratios).pvalue)


@pytest.mark.parametrize(("model", "expected"), [("llama2-7b", 0.67402), ("phi", 0.62884)])
def test_forget_truth_ratio_statistic_of_retain90(legacy_logs, model, expected):
    # shared/data/README quotes 0.67402 for "phi_retain90"; that value is llama2-7b_retain90's (phi's is 0.62884).
    ref = load_reference(legacy_logs / f"{model}_retain90" / "eval_log_forget.json", "forget10")
    assert truth_ratio_forget_stat(ref.forget_truth_ratios) == pytest.approx(expected, abs=1e-5)


def test_arithmetic_truth_ratio_option_recomputes_from_losses(legacy_logs):
    geo = load_reference(legacy_logs / "phi_retain90", "forget10", "geometric").forget_truth_ratios
    ari = load_reference(legacy_logs / "phi_retain90", "forget10", "arithmetic").forget_truth_ratios
    assert all(a >= g - 1e-12 for a, g in zip(ari, geo))  # AM >= GM
    assert not np.allclose(ari, geo)


@pytest.mark.parametrize(("folder", "split"), [("phi_retain95", "forget05"), ("phi_retain99", "forget01")])
def test_legacy_logs_pair_only_with_their_split(legacy_logs, folder, split):
    assert load_reference(legacy_logs / folder, split).forget_split == split
    with pytest.raises(ReferenceLogError, match=f"covers .* which is {split}; this task evaluates forget10"):
        load_reference(legacy_logs / folder, "forget10")


def test_open_unlearning_format(tmp_path):
    path = tmp_path / "TOFU_EVAL.json"
    by_index = {str(i): {"score": 0.5 + i / 100} for i in range(40)}
    path.write_text(json.dumps({"forget_truth_ratio": {"agg_value": 0.7, "value_by_index": by_index},
                                "mia_min_k": {"agg_value": 0.31}}))
    ref = load_reference(tmp_path, "forget01")
    assert ref.forget_truth_ratios[:2] == [0.5, 0.51]
    assert ref.mia_auc == {"mia_min_k_auc": 0.31}
    with pytest.raises(ReferenceLogError, match="forget05"):
        load_reference(path, "forget05")


def test_our_results_format_and_split_refusal(tmp_path):
    entry = {"format": "lm-eval-unlearning/tofu-reference/1", "forget_split": "forget05", "n_forget": 2,
             "forget_truth_ratio": [0.3, 0.9], "forget_question_keys": ["a", "b"],
             "mia_auc": {"mia_min_k_auc": 0.48}, "answer_scoring": "all"}
    out = tmp_path / "model" / "results_2026.json"
    out.parent.mkdir()
    out.write_text(json.dumps({"configs": {"tofu_forget05": {"unlearning_reference": entry}}}))
    ref = load_reference(tmp_path, "forget05")
    assert ref.forget_truth_ratios == [0.3, 0.9] and ref.mia_auc["mia_min_k_auc"] == 0.48
    with pytest.raises(ReferenceLogError, match=r"holds TOFU results for \['forget05'\], not for forget10"):
        load_reference(tmp_path, "forget10")


def test_reference_with_other_questions_is_refused(tmp_path):
    entry = {"forget_split": "forget01", "forget_truth_ratio": [1.0] * 3, "forget_question_keys": ["x", "y", "z"]}
    (tmp_path / "results_1.json").write_text(json.dumps({"configs": {"t": {"unlearning_reference": entry}}}))
    ref = load_reference(tmp_path, "forget01")
    check_items(ref, ["x", "y", "z", "w"])
    with pytest.raises(ReferenceLogError, match="another split or dataset"):
        check_items(ref, ["p", "q", "r"])


def test_unusable_references(tmp_path):
    with pytest.raises(ReferenceLogError, match="does not exist"):
        load_reference(tmp_path / "nope", "forget10")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(ReferenceLogError, match="not valid JSON"):
        load_reference(tmp_path / "x.json", "forget10")
    (tmp_path / "y.json").write_text(json.dumps({"something": 1}))
    with pytest.raises(ReferenceLogError, match="cannot give per-item forget truth ratios"):
        load_reference(tmp_path / "y.json", "forget10")
    with pytest.raises(ReferenceLogError, match="neither our lm-eval output"):
        load_reference(tmp_path, "forget10")
