"""PrivLeak's reference: our own results files (shared with TOFU's mechanism), open-unlearning's MUSE_EVAL.json,
MUSE's published AUROCs, a number; wrong inputs refused with what to pass."""

import json
import os

import pytest

from unlearn_tasks.muse.reference import load_reference
from unlearn_tasks.reference_logs import ReferenceLogError, record_format
from unlearn_tasks.tofu.reference import load_reference as load_tofu_reference


def _results(path, corpus="news", auc=0.61):
    record = {"format": record_format("muse"), "corpus": corpus, "mia_auc": {"mia_min_k_auc": auc, "mia_loss_auc": 0.7},
              "mia_k": 0.4}
    path.mkdir(parents=True, exist_ok=True)
    (path / "results_2026-01-01.json").write_text(json.dumps({"configs": {f"muse_{corpus}": {"unlearning_reference": record}}}))
    return path


def test_our_results_for_the_same_corpus(tmp_path):
    ref = load_reference(str(_results(tmp_path / "ref")), "news")
    assert ref.mia_auc == {"mia_min_k_auc": 0.61, "mia_loss_auc": 0.7} and ref.mia_k == 0.4


def test_our_results_for_another_corpus_are_refused(tmp_path):
    with pytest.raises(ReferenceLogError, match=r"holds MUSE results for \['news'\], not for books"):
        load_reference(str(_results(tmp_path / "ref")), "books")


def test_open_unlearning_muse_eval(tmp_path):
    (tmp_path / "MUSE_EVAL.json").write_text(json.dumps({"mia_min_k": {"agg_value": 0.55}, "privleak": {"agg_value": 3.0}}))
    assert load_reference(str(tmp_path), "books").mia_auc == {"mia_min_k_auc": 0.55}
    (tmp_path / "other.json").write_text(json.dumps({"forget_knowmem_ROUGE": {"agg_value": 0.3}}))
    with pytest.raises(ReferenceLogError, match="no mia_min_k.agg_value"):
        load_reference(str(tmp_path / "other.json"), "news")


def test_published_and_numeric_references():
    assert load_reference("published", "news").mia_auc["mia_min_k_auc"] == pytest.approx(0.5228)
    assert load_reference("published", "books").mia_auc["mia_min_k_auc"] == pytest.approx(0.4607)
    assert load_reference(0.5, "news").mia_auc == {"mia_min_k_auc": 0.5}
    with pytest.raises(ReferenceLogError, match=r"in \[0, 1\]"):
        load_reference(1.5, "news")


def test_missing_or_unknown_paths(tmp_path):
    with pytest.raises(ReferenceLogError, match="does not exist"):
        load_reference(str(tmp_path / "nope"), "news")
    with pytest.raises(ReferenceLogError, match="neither our lm-eval output"):
        load_reference(str(tmp_path), "news")


def test_tofu_never_takes_a_muse_record_as_its_reference(tmp_path):
    with pytest.raises(ReferenceLogError, match="neither our lm-eval output"):
        load_tofu_reference(_results(tmp_path / "ref"), "forget10")


def _named_results(folder, name, auc, model):
    record = {"format": record_format("muse"), "corpus": "news", "mia_auc": {"mia_min_k_auc": auc}, "mia_k": 0.4}
    path = folder / model / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"config": {"model_args": f"pretrained={model}"},
                                "configs": {"muse_news": {"unlearning_reference": record}}}))
    return path


def test_the_newest_file_by_name_is_read_whatever_the_file_times(tmp_path):
    """MUSE reads references by the same rules as TOFU (one reader): the file-name timestamp decides, not mtime."""
    old = _named_results(tmp_path, "results_2026-01-01T00-00-00.json", 0.3, "retrained")
    new = _named_results(tmp_path, "results_2026-02-01T00-00-00.json", 0.6, "retrained")
    for old_time, new_time in ((1e9, 2e9), (2e9, 1e9)):  # both orders of modification times
        os.utime(old, (old_time, old_time))
        os.utime(new, (new_time, new_time))
        ref = load_reference(str(tmp_path), "news")
        assert ref.mia_auc == {"mia_min_k_auc": 0.6} and ref.path == str(new)


def test_the_evaluated_models_own_run_is_never_its_reference(tmp_path):
    retrained = _named_results(tmp_path, "results_2026-01-01T00-00-00.json", 0.5, "retrained")
    own = _named_results(tmp_path, "results_2026-02-01T00-00-00.json", 0.9, "target")
    assert load_reference(str(tmp_path), "news", {"pretrained": "target"}).path == str(retrained)
    with pytest.raises(ReferenceLogError, match=r"produced by the model being evaluated \(pretrained=target\)"):
        load_reference(str(own), "news", {"pretrained": "target"})
    with pytest.raises(ReferenceLogError, match="MUSE results of 2 different models"):
        load_reference(str(tmp_path), "news", {"pretrained": "other"})
