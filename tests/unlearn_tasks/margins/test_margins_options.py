"""The margins tasks' --metadata options are declared once (param(...) fields of MarginOptions): a bad value is one
line naming the key and what it may be, an unknown key is refused with a suggestion."""

import pytest

from unlearn_tasks.margins.options import MarginOptions


@pytest.mark.parametrize(("metadata", "message"), [
    ({"data_file": "f.jsonl", "reduction": "max"}, "margins task option: reduction must be one of mean, sum, got "
                                                    "'max' (check --metadata / the task YAML)."),
    ({"benchmark": "tofu", "forget_split": "forget5"}, "margins task option: forget_split must be one of forget01, "
     "forget05, forget10, got 'forget5' (check --metadata / the task YAML)."),
    ({"data_file": "f.jsonl", "max_items_per_split": -2}, "margins task option: max_items_per_split must be a whole number >= 1, got "
                                                           "-2 (check --metadata / the task YAML)."),
])
def test_a_bad_value_is_one_line_naming_what_the_key_takes(metadata, message):
    with pytest.raises(ValueError) as e:
        MarginOptions.from_metadata(metadata)
    assert str(e.value) == message


def test_an_unknown_key_gets_a_suggestion_and_valid_values_still_read():
    with pytest.raises(ValueError, match=r"^margins task: unknown --metadata key\(s\) 'keep_token_margin' \(did you "
                                         r"mean 'keep_token_margins'\?\)"):
        MarginOptions.from_metadata({"data_file": "f.jsonl", "keep_token_margin": True})
    opts = MarginOptions.from_metadata({"data_file": "f.jsonl", "reduction": "sum", "include_eos": True})
    assert (opts.benchmark, opts.reduction, opts.include_eos, opts.prompt_field) == ("file", "sum", True, "prompt")
