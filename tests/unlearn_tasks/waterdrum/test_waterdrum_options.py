"""WaterDrum's --metadata options are declared once (param(...) fields of WaterDrumOptions): a bad value is one line
naming the key and what it may be, an unknown key is refused with a suggestion."""

import pytest

from unlearn_tasks.waterdrum.options import WaterDrumOptions


@pytest.mark.parametrize(("metadata", "message"), [
    ({"benchmark": "arxiv"}, "WaterDrum task option: benchmark must be one of ax, tofu, got 'arxiv' (check --metadata "
                             "/ the task YAML)."),
    ({"splits": "retain, full"}, "WaterDrum task option: splits must be a non-empty subset of retain, forget, "
     "exact_duplicate, semantic_duplicate, got ['retain', 'full'] (check --metadata / the task YAML)."),
    ({"k_p": 0}, "WaterDrum task option: k_p must be a whole number >= 1, got 0 (check --metadata / the task YAML)."),
    ({"parts": "rouge"}, "WaterDrum task option: parts must be a subset of ('watermark', 'rouge', 'knowmem', 'mia') "
                         "that includes 'watermark' (check --metadata / the task YAML)."),
])
def test_a_bad_value_is_one_line_naming_what_the_key_takes(metadata, message):
    with pytest.raises(ValueError) as e:
        WaterDrumOptions.from_metadata(metadata)
    assert str(e.value) == message


def test_an_unknown_key_gets_a_suggestion_and_valid_values_still_read():
    with pytest.raises(ValueError, match=r"^WaterDrum task: unknown --metadata key\(s\) 'verify_vocab' \(did you mean "
                                         r"'verify_vocab_size'\?\)"):
        WaterDrumOptions.from_metadata({"verify_vocab": 100})
    opts = WaterDrumOptions.from_metadata({"benchmark": "tofu", "splits": "retain, exact_duplicate", "k_p": 2})
    assert (opts.splits, opts.duplicate_owner, opts.k_p, opts.repo_id) == (
        ["retain", "exact_duplicate"], 0, 2, "Glow-AI/WaterDrum-TOFU")
