"""CLEAR's --metadata options are declared once (param(...) fields of ClearOptions): a bad value is one line naming
the key and what it may be, an unknown key is refused with a suggestion."""

import pytest

from unlearn_tasks.clear.options import ClearOptions


@pytest.mark.parametrize(("metadata", "message"), [
    ({"mode": "release"}, "CLEAR task option: mode must be one of default, parity, got 'release' (check --metadata / "
                          "the task YAML)."),
    ({"sets": ["forget_caption", "faces"]}, "CLEAR task option: sets must be a non-empty subset of forget_caption, "
     "retain_caption, forget_facerec, retain_facerec, real_faces, real_world, got ['forget_caption', 'faces'] (check "
     "--metadata / the task YAML)."),
    ({"max_items_per_split": 0}, "CLEAR task option: max_items_per_split must be a whole number >= 1, got 0 (check --metadata / the "
                                 "task YAML)."),
])
def test_a_bad_value_is_one_line_naming_what_the_key_takes(metadata, message):
    with pytest.raises(ValueError) as e:
        ClearOptions.from_metadata(metadata)
    assert str(e.value) == message


def test_an_unknown_key_gets_a_suggestion_and_valid_values_still_read():
    with pytest.raises(ValueError, match=r"^CLEAR task: unknown --metadata key\(s\) 'tofu_data_dri' \(did you mean "
                                         r"'tofu_data_dir'\?\)"):
        ClearOptions.from_metadata({"tofu_data_dri": "d"})
    opts = ClearOptions.from_metadata({"mode": "parity", "sets": ["real_world"], "tofu_data_dir": "t", "seed": 3})
    assert (opts.mode, opts.sets, opts.tofu_data_dir, opts.seed, opts.parts) == (
        "parity", ["real_world"], "t", 3, ["generation", "likelihood"])
