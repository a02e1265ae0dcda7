"""MUSE's --metadata options are declared once (param(...) fields of MuseOptions): a bad value is one line naming
the key and what it may be, an unknown key is refused with a suggestion."""

import pytest

from unlearn_tasks.muse.options import MuseOptions


@pytest.mark.parametrize(("metadata", "message"), [
    ({"corpus": "news2"}, "MUSE task option: corpus must be one of news, books, got 'news2' (check --metadata / the "
                          "task YAML)."),
    ({"mia_k": 0}, "MUSE task option: mia_k must be a number > 0, <= 1, got 0 (check --metadata / the task YAML)."),
    ({"verbmem_max_tokens": 0}, "MUSE task option: verbmem_max_tokens must be a whole number >= 1, got 0 (check --metadata / the "
                                "task YAML)."),
    ({"parts": "verbmem"}, "MUSE task option: parts must be a non-empty subset of verbmem, knowmem, privleak, got "
                           "'verbmem' (check --metadata / the task YAML)."),
])
def test_a_bad_value_is_one_line_naming_what_the_key_takes(metadata, message):
    with pytest.raises(ValueError) as e:
        MuseOptions.from_metadata(metadata)
    assert str(e.value) == message


def test_an_unknown_key_gets_a_suggestion_and_valid_values_still_read():
    with pytest.raises(ValueError, match=r"^MUSE task: unknown --metadata key\(s\) 'muse_data' \(did you mean "
                                         r"'muse_data_dir'\?\)"):
        MuseOptions.from_metadata({"muse_data": "d"})
    opts = MuseOptions.from_metadata({"corpus": "books", "mia_k": 1, "parts": ["knowmem"], "pretrained": "m"})
    assert (opts.corpus, opts.mia_k, opts.parts, opts.tokenizer, opts.knowmem_max_tokens) == (
        "books", 1, ["knowmem"], "m", 32)
