"""Issue 25, item 5: benchmarks are found without a list (a folder with ``benchmark.py`` is enough), options classes
register themselves, and ReLU and deep unlearning read ``--metadata`` through the same ``MetadataOptions`` base."""

from dataclasses import dataclass
from pathlib import Path

import pytest

import unlearn_tasks
from unlearn_tasks.benchmarks import benchmark, benchmark_of_task, benchmarks


def test_every_folder_with_a_declaration_is_a_benchmark():
    folders = {p.parent.name for p in Path(unlearn_tasks.__file__).parent.glob("*/benchmark.py")}
    assert folders == {"blur", "clear", "deep_unlearning", "dusk", "knowundo", "lume", "margins", "mllmu", "muse",
                       "muse_leak", "rwku", "tofu", "tofu_formats", "tofu_leak", "waterdrum", "wmdp", "wmdp_leak"}
    assert set(benchmarks()) == folders  # each declares the name of its folder


@pytest.mark.parametrize("task, name", [
    ("tofu_forget10", "tofu"), ("tofu_forget01_likelihood", "tofu"), ("tofu_mcqa_2opt_forget10", "tofu_formats"),
    ("tofu_formats", "tofu_formats"), ("muse_news_knowmem", "muse"), ("wmdp_bio", "wmdp"), ("evaldu", "deep_unlearning"),
    ("mquake_du", "deep_unlearning"), ("clear_forget10_image", "clear"), ("waterdrum_ax", "waterdrum"),
    ("margins_tofu_forget10", "margins"), ("rwku_forget_level3", "rwku"), ("rwku", "rwku"),
    ("lume_task2", "lume"), ("lume", "lume"),
    ("knowundo_privacy", "knowundo"), ("blur_wmdp", "blur"),
    ("dusk_privacy", "dusk"), ("dusk", "dusk"),
    ("tofu_forget10_leak", "tofu_leak"), ("muse_news_knowmem_leak", "muse_leak"), ("wmdp_bio_leak", "wmdp_leak"),
])
def test_a_task_belongs_to_the_benchmark_with_the_longest_matching_name(task, name):
    assert benchmark_of_task(task).name == name


def test_tasks_of_no_benchmark_and_benchmarks_without_rows_get_the_tofu_order():
    from unlearn_app.reports.tables import rows_for_task

    assert benchmark_of_task("hellaswag") is None
    tofu = rows_for_task("tofu_forget10")
    assert tofu[0] == ("forget_quality", "Forget Quality (KS p-value vs retain)") and len(tofu) == 19
    assert rows_for_task("hellaswag") == rows_for_task("tofu_mcqa_forget10") == rows_for_task("clear_forget10") == tofu
    assert [k for k, _ in rows_for_task("muse_books")][:4] == ["forget_verbmem", "forget_knowmem", "privleak",
                                                               "retain_knowmem"]
    assert rows_for_task("wmdp_chem") == [("acc", "Accuracy (4 options, chance 0.25; lower = more hazardous "
                                                  "knowledge removed)")]
    with pytest.raises(KeyError, match="no benchmark 'nope'; known: .*clear, "):
        benchmark("nope")


def test_the_declared_directions_reach_lm_eval():
    """Each task class reports its benchmark's declared lower-is-better metrics (lm-eval's higher_is_better)."""
    assert benchmark("tofu").lower_is_better == {"forget_rougeL_recall", "forget_prob", "privleak", "mia_loss_auc",
                                                 "mia_zlib_auc", "mia_min_k_auc", "mia_min_k_plus_plus_auc",
                                                 "extraction_strength", "exact_memorization", "mia_reference_auc",
                                                 "mia_gradnorm_auc"}
    assert benchmark("clear").lower_is_better == {"forget_caption_prob", "forget_caption_rougeL_recall",
                                                  "forget_caption_truth_ratio", "forget_facerec_prob",
                                                  "forget_facerec_rougeL_recall", "forget_facerec_truth_ratio",
                                                  "forget_score"}
    assert benchmark("margins").lower_is_better == {"margin_forget"}


def test_an_options_class_registers_itself_and_its_keys_join_the_union():
    from unlearn_tasks import metadata
    from unlearn_tasks.tofu.options import TofuOptions

    with pytest.raises(ValueError, match="unknown --metadata key"):
        TofuOptions.from_metadata({"zz_threshold": 1})

    @dataclass
    class ZzOptions(metadata.MetadataOptions):
        WHERE = "zz task"
        zz_threshold: int = 3

    try:
        assert TofuOptions.from_metadata({"zz_threshold": 1}).forget_split == "forget10"
        with pytest.raises(ValueError, match=r"zz task option: zz_threshold must be a whole number, got 'x'"):
            ZzOptions.from_metadata({"zz_threshold": "x"})
    finally:
        metadata._REGISTERED.pop(f"{ZzOptions.__module__}.{ZzOptions.__qualname__}")


def test_relu_options_map_their_prefixed_keys_onto_fields():
    from unlearn_tasks.tofu_formats.options import ReluOptions

    opts = ReluOptions.from_metadata({"relu_format": "mcqa", "relu_splits": ["forget10", "retain90"],
                                      "relu_pair": "forget05", "relu_options": 3, "data_dir": "d",
                                      "pretrained": "m", "revision": "r"})
    assert (opts.format, opts.splits, opts.n_options, opts.mode) == ("mcqa", ["forget05", "retain95"], 3, "default")
    assert (opts.data_dir, opts.tokenizer, opts.tokenizer_kwargs) == ("d", "m", {"revision": "r"})
    assert ReluOptions.from_metadata({"relu_format": "cloze", "relu_splits": ["forget10"], "relu_data_dir": "a",
                                      "data_dir": "b"}).data_dir == "a"
    assert ReluOptions.metadata_keys() == {"relu_format", "relu_splits", "relu_options", "relu_mode", "relu_data_dir",
                                           "relu_dataset_path", "relu_pair", "data_dir", "max_items_per_split",
                                           "version"}
    with pytest.raises(ValueError, match=r"^ReLU task: metadata lacks relu_format \(check the task YAML\)\.$"):
        ReluOptions.from_metadata({"relu_splits": ["forget10"]})
    with pytest.raises(ValueError, match=r"ReLU task option: relu_dataset_path must be text, got 5"):
        ReluOptions.from_metadata({"relu_format": "cloze", "relu_splits": ["forget10"], "relu_dataset_path": 5})
    with pytest.raises(ValueError, match=r"ReLU task option: relu_options must be one of \(4, 3, 2\)"):
        ReluOptions.from_metadata({"relu_format": "mcqa", "relu_splits": ["forget10"], "relu_options": "x"})
    with pytest.raises(ValueError, match=r"ReLU task option: relu_mode must be one of"):
        ReluOptions.from_metadata({"relu_format": "mcqa", "relu_splits": ["forget10"], "relu_mode": "zz"})


def test_deep_unlearning_options_check_keys_and_types():
    from unlearn_tasks.deep_unlearning.options import DeepUnlearningOptions

    assert DeepUnlearningOptions.from_metadata({"benchmark": "mquake", "mquake_path": "f.json", "target": "272",
                                                "pretrained": "m"}).target == "272"
    with pytest.raises(ValueError, match=r"Deep unlearning task: unknown --metadata key\(s\) 'targt' \(did you mean "
                                         r"'target'\?\)"):
        DeepUnlearningOptions.from_metadata({"targt": 3})
    with pytest.raises(ValueError, match=r"Deep unlearning task option: fix_rule_typos must be true or false, got 'y'"):
        DeepUnlearningOptions.from_metadata({"fix_rule_typos": "y"})
