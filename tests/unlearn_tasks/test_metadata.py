"""Issue 12, item 7: misspelt or out-of-range ``--metadata`` options are errors listing the valid keys (they were
silently ignored: ``answer_scorring`` ran with ``all``, ``max_items_per_split: -1`` dropped the last item)."""

import pytest

from unlearn_tasks.tofu.options import TofuOptions


def test_misspelt_key_is_an_error_with_a_suggestion_and_the_valid_keys():
    with pytest.raises(ValueError, match=r"unknown --metadata key\(s\) 'answer_scorring' \(did you mean "
                                         r"'answer_scoring'\?\)\. Valid keys for this task: answer_scoring, data_dir"):
        TofuOptions.from_metadata({"answer_scorring": "tofu"})
    with pytest.raises(ValueError, match="'zzz'. Valid keys"):
        TofuOptions.from_metadata({"zzz": 1})


def test_model_arguments_and_other_benchmarks_keys_are_accepted():
    """lm-eval copies --model_args into the metadata, and --metadata reaches every task of a run."""
    opts = TofuOptions.from_metadata({"pretrained": "m", "dtype": "float32", "peft": "a", "revision": "main",
                                      "attn_implementation": "sdpa", "relu_mode": "x", "target": 3,
                                      "version": 1.0, "answer_scoring": "tofu"})
    assert opts.answer_scoring == "tofu"


@pytest.mark.parametrize("value", [-1, 0, 2.5, "3", True])
def test_max_items_per_split_must_be_a_positive_whole_number(value):
    with pytest.raises(ValueError, match=r"max_items_per_split must be a whole number >= 1"):
        TofuOptions.from_metadata({"max_items_per_split": value})


def test_bad_values_name_the_option():
    with pytest.raises(ValueError, match=r"mia_k must be a number in \(0, 1\]"):
        TofuOptions.from_metadata({"mia_k": "high"})
    with pytest.raises(ValueError, match="parts must be a non-empty subset"):
        TofuOptions.from_metadata({"parts": "likelihood"})


def test_other_benchmarks_check_their_keys_too():
    from unlearn_tasks.tofu_formats.options import ReluOptions
    from unlearn_tasks.waterdrum.options import WaterDrumOptions

    with pytest.raises(ValueError, match=r"WaterDrum task: unknown --metadata key\(s\) 'generatons' \(did you mean "
                                         r"'generations'\?\)"):
        WaterDrumOptions.from_metadata({"generatons": 3})
    with pytest.raises(ValueError, match=r"ReLU task: unknown --metadata key\(s\) 'relu_mod' \(did you mean 'relu_mode'"):
        ReluOptions.from_metadata({"relu_format": "mcqa", "relu_mod": "x"})
    with pytest.raises(ValueError, match="max_items_per_split must be a whole number"):
        WaterDrumOptions.from_metadata({"max_items_per_split": -1})


def test_the_key_lists_cover_every_options_field():
    from dataclasses import fields

    from unlearn_tasks.margins.task import MarginOptions
    from unlearn_tasks.metadata import benchmark_keys
    from unlearn_tasks.waterdrum.options import WaterDrumOptions

    for cls in (TofuOptions, WaterDrumOptions, MarginOptions):
        assert {f.name for f in fields(cls)} - {"model_tokenizer"} <= benchmark_keys(), cls


def test_one_options_reader_names_the_key_and_its_type_for_every_benchmark():
    """Every options dataclass reads --metadata through MetadataOptions: unknown keys and wrong types are errors."""
    from unlearn_tasks.clear.options import ClearOptions
    from unlearn_tasks.margins.task import MarginOptions
    from unlearn_tasks.muse.options import MuseOptions
    from unlearn_tasks.waterdrum.options import WaterDrumOptions

    with pytest.raises(ValueError, match=r"CLEAR task option: seed must be a whole number, got 'x'"):
        ClearOptions.from_metadata({"seed": "x"})
    with pytest.raises(ValueError, match=r"MUSE task option: mia_k must be a number, got 'high'"):
        MuseOptions.from_metadata({"mia_k": "high"})
    with pytest.raises(ValueError, match=r"ids must be text or a list of whole numbers or null, got \[1, 'a'\]"):
        WaterDrumOptions.from_metadata({"ids": [1, "a"]})
    with pytest.raises(ValueError, match=r"margins task option: include_eos must be true or false, got 'yes'"):
        MarginOptions.from_metadata({"include_eos": "yes", "data_file": "f.jsonl"})
    with pytest.raises(ValueError, match=r"MUSE task: unknown --metadata key\(s\) 'verbmem_max_token' \(did you mean"):
        MuseOptions.from_metadata({"verbmem_max_token": 3})
    assert WaterDrumOptions.from_metadata({"splits": "retain, forget"}).splits == ["retain", "forget"]
    assert MuseOptions.from_metadata({"pretrained": "m", "revision": "r"}).tokenizer_kwargs == {"revision": "r"}
