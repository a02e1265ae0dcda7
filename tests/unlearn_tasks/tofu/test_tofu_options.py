"""TOFU's --metadata options are declared once (param(...) fields of TofuOptions): a bad value is one line naming
the key and what it may be, an unknown key is refused with a suggestion, and the README's table is those fields."""

import pytest

from unlearn_tasks.tofu.options import TofuOptions


@pytest.mark.parametrize(("metadata", "message"), [
    ({"forget_split": "forget20"}, "TOFU task option: forget_split must be one of forget01, forget05, forget10, got "
                                   "'forget20' (check --metadata / the task YAML)."),
    ({"parts": ["likelihood", "rouge"]}, "TOFU task option: parts must be a non-empty subset of generation, "
                                         "likelihood, got ['likelihood', 'rouge'] (check --metadata / the task YAML)."),
    ({"mia_k": 1.5}, "TOFU task option: mia_k must be a number > 0, <= 1, got 1.5 (check --metadata / the task "
                     "YAML)."),
    ({"mia_gradnorm": "yes"}, "TOFU task option: mia_gradnorm must be true or false, got 'yes' (check --metadata / "
                              "the task YAML)."),
])
def test_a_bad_value_is_one_line_naming_what_the_key_takes(metadata, message):
    with pytest.raises(ValueError) as e:
        TofuOptions.from_metadata(metadata)
    assert str(e.value) == message


def test_an_unknown_key_gets_a_suggestion_and_valid_values_still_read():
    with pytest.raises(ValueError, match=r"^TOFU task: unknown --metadata key\(s\) 'truth_ratio_meen' \(did you mean "
                                         r"'truth_ratio_mean'\?\)\. Valid keys for this task: answer_scoring, "):
        TofuOptions.from_metadata({"truth_ratio_meen": "arithmetic"})
    opts = TofuOptions.from_metadata({"forget_split": "forget05", "parts": ["likelihood"], "mia_k": 1})
    assert (opts.forget_split, opts.parts, opts.mia_k, opts.generation_prompt) == ("forget05", ["likelihood"], 1,
                                                                                   "lm_eval")
    assert TofuOptions.from_metadata({"answer_scoring": "tofu"}).generation_prompt == "tofu"


def test_the_readme_table_is_the_declared_fields():
    from pathlib import Path

    rows = TofuOptions.markdown()
    readme = (Path(__file__).resolve().parents[3] / "task_yaml" / "tofu" / "README.md").read_text()
    assert "\n".join(rows) in readme
    assert [r.split("`")[1] for r in rows[2:]] == list(TofuOptions.help())
