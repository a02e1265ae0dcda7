"""What a method supports is declared on its class (qa_only, vision, needs_reference), not in lists elsewhere."""

from unlearn_methods import all_methods, describe_methods


def test_capabilities_are_class_attributes():
    methods = all_methods()
    assert sorted(n for n, c in methods.items() if c.qa_only) == ["altpo", "dpo", "idk", "llmu"]
    assert sorted(n for n, c in methods.items() if not c.vision) == ["altpo", "task_vector", "whp"]
    assert methods["npo"].needs_reference and not methods["ga"].needs_reference


def test_unlearn_methods_lists_the_limits():
    listing = describe_methods()
    altpo = listing[listing.index("altpo:"):].split("\n\n")[0]
    assert ("limits: questions only (not raw text such as MUSE); not for vision-language models (--data clear)"
            in altpo)
    ga = listing[listing.index("ga:"):].split("\n\n")[0]
    assert "limits:" not in ga


def test_the_forget_corpus_is_declared_and_listed():
    methods = all_methods()
    assert {n: c.forget_corpus for n, c in methods.items() if c.forget_corpus != "text"} == {
        "altpo": "pair", "dpo": "pair", "idk": "refusal", "llmu": "pair"}
    listing = describe_methods()
    idk = listing[listing.index("idk:"):].split("\n\n")[0]
    assert "forget corpus: refusal" in idk
    assert "forget corpus" not in listing[listing.index("ga:"):].split("\n\n")[0]
