"""Eval-DU's and MQuAKE's --metadata options are declared once (param(...) fields of DeepUnlearningOptions) and the
task reads the knowledge base through them: a bad value is one line naming the key and what it may be, an unknown key
is refused with a suggestion."""

import pytest

from unlearn_tasks.deep_unlearning.options import DeepUnlearningOptions
from unlearn_tasks.deep_unlearning.task import load_kb_from_options


@pytest.mark.parametrize(("metadata", "message"), [
    ({"benchmark": "mquake_cf"}, "Deep unlearning task option: benchmark must be one of evaldu, mquake, got "
                                 "'mquake_cf' (check --metadata / the task YAML)."),
    ({"fix_rule_typos": "yes"}, "Deep unlearning task option: fix_rule_typos must be true or false, got 'yes' (check "
                                "--metadata / the task YAML)."),
])
def test_a_bad_value_is_one_line_naming_what_the_key_takes(metadata, message):
    with pytest.raises(ValueError) as e:
        DeepUnlearningOptions.from_metadata(metadata)
    assert str(e.value) == message


def test_an_unknown_key_gets_a_suggestion_and_the_knowledge_base_comes_from_the_options():
    with pytest.raises(ValueError, match=r"^Deep unlearning task: unknown --metadata key\(s\) 'mquake_pat' \(did you "
                                         r"mean 'mquake_path'\?\)"):
        DeepUnlearningOptions.from_metadata({"mquake_pat": "m.json"})
    opts = DeepUnlearningOptions.from_metadata({"benchmark": "mquake", "target": "272"})
    assert (opts.benchmark, opts.target, opts.fix_rule_typos) == ("mquake", "272", False)
    with pytest.raises(ValueError, match=r"^mquake_du: pass the local MQuAKE file"):
        load_kb_from_options(opts, "mquake_du")
