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


# item 0 by hand: exp(avg_paraphrased_loss - mean(average_perturb_loss)) over the log's 5 perturbed losses
# phi: exp(2.17159 - mean(4.84890, 4.47636, 4.35039, 3.64654, 4.47020)) = 0.1122654
# llama2-7b: exp(2.22872 - mean(3.35582, 3.69020, 3.71941, 4.43224, 2.97367)) = 0.2452337
@pytest.mark.parametrize(("model", "first"), [("phi", 0.1122654), ("llama2-7b", 0.2452337)])
def test_legacy_truth_ratios_recomputed_from_losses_match_the_log(legacy_logs, model, first):
    path = legacy_logs / f"{model}_full" / "eval_log_forget.json"
    ref = load_reference(path, "forget10")
    assert len(ref.forget_truth_ratios) == 300
    np.testing.assert_allclose(ref.forget_truth_ratios, _legacy_ratios(path), rtol=1e-5)
    assert ref.forget_truth_ratios[0] == pytest.approx(first, rel=1e-6)


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


def test_open_unlearning_log_of_local_data_is_accepted_when_its_count_is_the_tasks(tmp_path):
    """A local TOFU-schema folder (the demo corpus: 24 forget10 questions) is no TOFU split size; its
    open-unlearning log is accepted when the task evaluates that many forget items, refused otherwise."""
    path = tmp_path / "TOFU_EVAL.json"
    by_index = {str(i): {"score": 0.2 + i / 100} for i in range(24)}
    path.write_text(json.dumps({"forget_truth_ratio": {"agg_value": 0.5, "value_by_index": by_index}}))
    with pytest.raises(ReferenceLogError, match="covers 24 forget items, which is no TOFU forget split"):
        load_reference(path, "forget10")
    with pytest.raises(ReferenceLogError, match="covers 24 forget items"):
        load_reference(path, "forget10", n_forget=23)
    ref = load_reference(path, "forget10", n_forget=24)
    assert ref.forget_split == "forget10" and len(ref.forget_truth_ratios) == 24
    assert ref.forget_truth_ratios[:2] == pytest.approx([0.2, 0.21])


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
    check_items(ref, ["z", "y", "x"])
    with pytest.raises(ReferenceLogError, match="another split or dataset"):
        check_items(ref, ["p", "q", "r"])


def _results(folder, name, ratios, keys, model):
    """A results file of our TOFU task for ``model`` (lm-eval writes one folder per model)."""
    entry = {"forget_split": "forget01", "forget_truth_ratio": ratios, "forget_question_keys": keys,
             "mia_auc": {}, "answer_scoring": "all"}
    path = folder / model.replace("/", "__") / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"config": {"model_args": {"pretrained": model}},
                                "configs": {"tofu_forget01": {"unlearning_reference": entry}}}))
    return path


def test_reference_made_with_limit_is_refused_naming_both_counts(tmp_path):
    """Issue 12, item 4: a reference of one forget item (``--limit``) gave FQ 0.333 instead of 0.008."""
    _results(tmp_path, "results_1.json", [0.5], ["x"], "retain")
    ref = load_reference(tmp_path, "forget01")
    with pytest.raises(ReferenceLogError, match=r"covers 1 forget items, this evaluation 3.*without --limit"):
        check_items(ref, ["x", "y", "z"])


def test_reference_folder_choice_is_deterministic_and_never_the_evaluated_model(tmp_path):
    """Issue 12, item 3: the newest results file anywhere under the folder was read, so the evaluated model's own
    run (written there with --output_path) became its reference (Forget Quality 1.0)."""
    import os

    old = _results(tmp_path, "results_2026-01-01T00-00-00.json", [0.1, 0.2], ["x", "y"], "retain")
    new = _results(tmp_path, "results_2026-02-01T00-00-00.json", [0.3, 0.4], ["x", "y"], "retain")
    os.utime(old, (2e9, 2e9))  # file times play no part: the name's timestamp does
    ref = load_reference(tmp_path, "forget01", evaluated_model={"pretrained": "target"})
    assert ref.forget_truth_ratios == [0.3, 0.4] and ref.path == str(new)
    own = _results(tmp_path, "results_2026-03-01T00-00-00.json", [0.9, 0.9], ["x", "y"], "target")
    ref = load_reference(tmp_path, "forget01", evaluated_model={"pretrained": "target"})
    assert ref.path == str(new)  # the target's own newer run is skipped
    with pytest.raises(ReferenceLogError, match=r"produced by the model being evaluated \(pretrained=target\)"):
        load_reference(own, "forget01", evaluated_model={"pretrained": "target"})
    with pytest.raises(ReferenceLogError, match=r"results of 2 different models .*pretrained=target in .*pretrained=retain in "):
        load_reference(tmp_path, "forget01", evaluated_model={"pretrained": "other"})


def test_model_identity_fingerprints_local_weights(tmp_path):
    from unlearn_tasks.tofu.reference import model_identity, same_model

    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for folder, data in ((a, b"w" * 10000), (b, b"w" * 10000), (c, b"v" * 10000)):
        folder.mkdir()
        (folder / "model.safetensors").write_bytes(data)
    ida, idb, idc = (model_identity({"pretrained": str(p), "dtype": "float32"}) for p in (a, b, c))
    assert same_model(ida, idb)  # a copy of the same weights is the same model
    assert not same_model(ida, idc)
    assert model_identity(f"pretrained={a},dtype=float32") == ida
    assert same_model(model_identity({"pretrained": "org/m"}), model_identity("pretrained=org/m"))
    assert not same_model(model_identity({"pretrained": "org/m"}), model_identity("pretrained=org/m,revision=v2"))
    retrained = dict(ida, fingerprint="other")  # the same folder with new weights: still that model
    assert same_model(ida, retrained)


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


def test_a_retain_model_retrained_and_re_evaluated_into_the_same_folder_uses_the_newest_run(tmp_path):
    for name, ratios, fingerprint in (("results_2026-01-01T00-00-00.json", [0.1, 0.2], "old"),
                                      ("results_2026-02-01T00-00-00.json", [0.3, 0.4], "new")):
        path = _results(tmp_path, name, ratios, ["x", "y"], "retain")
        data = json.loads(path.read_text())
        data["configs"]["tofu_forget01"]["unlearning_reference"]["model"] = {"pretrained": "retain",
                                                                             "fingerprint": fingerprint}
        path.write_text(json.dumps(data))
    ref = load_reference(tmp_path, "forget01", evaluated_model={"pretrained": "target", "fingerprint": "t"})
    assert ref.forget_truth_ratios == [0.3, 0.4]
