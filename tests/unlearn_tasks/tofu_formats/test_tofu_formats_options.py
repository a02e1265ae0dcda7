"""The ReLU tasks' --metadata options are declared once (param(...) fields of ReluOptions, read under their relu_
keys): a bad value is one line naming the key and what it may be, an unknown key is refused with a suggestion."""

import pytest

from unlearn_tasks.tofu_formats.options import ReluOptions

PAIR = {"relu_format": "cloze", "relu_splits": ["forget10", "retain90"]}


@pytest.mark.parametrize(("metadata", "message"), [
    ({**PAIR, "relu_pair": "forget20"}, "ReLU task option: relu_pair must be one of forget01, forget05, forget10, "
                                        "got 'forget20' (check --metadata / the task YAML)."),
    ({**PAIR, "relu_format": "mcq"}, "ReLU task option: relu_format must be one of mcqa, cloze, analogy_mcqa, "
     "analogy_qa, odd_one_out, comprehension_qa, comprehension_mcqa, got 'mcq' (check --metadata / the task YAML)."),
    ({**PAIR, "max_items_per_split": 0}, "ReLU task option: max_items_per_split must be a whole number >= 1, got 0 (check --metadata "
                                         "/ the task YAML)."),
])
def test_a_bad_value_is_one_line_naming_what_the_key_takes(metadata, message):
    with pytest.raises(ValueError) as e:
        ReluOptions.from_metadata(metadata)
    assert str(e.value) == message


def test_an_unknown_key_gets_a_suggestion_and_valid_values_still_read():
    with pytest.raises(ValueError, match=r"^ReLU task: unknown --metadata key\(s\) 'relu_par' \(did you mean "
                                         r"'relu_pair'\?\)"):
        ReluOptions.from_metadata({**PAIR, "relu_par": "forget05"})
    opts = ReluOptions.from_metadata({**PAIR, "relu_pair": "forget05", "data_dir": "d", "relu_mode": "parity"})
    assert (opts.splits, opts.data_dir, opts.mode, opts.roles()) == (
        ["forget05", "retain95"], "d", "parity", [("forget", "forget05"), ("retain", "retain95")])
    assert ReluOptions.from_metadata({**PAIR, "relu_data_dir": "r", "data_dir": "d"}).data_dir == "r"
