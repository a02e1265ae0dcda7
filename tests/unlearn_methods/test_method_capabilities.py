"""What a method supports is declared on its class (qa_only, vision, needs_reference), not in lists elsewhere."""

from unlearn_methods import all_methods, describe_methods


def test_capabilities_are_class_attributes():
    methods = all_methods()
    assert sorted(n for n, c in methods.items() if c.qa_only) == ["altpo", "dpo", "idk", "llmu"]
    assert sorted(n for n, c in methods.items() if not c.vision) == ["altpo", "task_vector", "whp"]
    assert methods["npo"].uses_reference() and not methods["ga"].uses_reference()
    # the reference only through each row's answer NLL, computed once: no reference model kept during training
    assert {n: c.reference_nll for n, c in methods.items() if c.reference_nll} == {
        "altpo": ("forget_alternate", "forget"), "dpo": ("forget_idk", "forget"), "npo": ("forget",)}
    assert not methods["npo"].needs_reference and methods["npo"]({"retain_loss": "kl"}).needs_reference
    assert methods["kl"].needs_reference and methods["rmu"].needs_reference and methods["undial"].needs_reference


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


def test_every_refused_combination_is_refused_before_any_file_is_written(tmp_path):
    """train(): each check of the method against the data source and the options comes before the working folder
    (OUT.partial) and its saved configuration are written (the model is never loaded: it does not exist)."""
    import pytest

    from unlearn_methods.config import load_run_config
    from unlearn_methods.training import UnlearningFailed, train

    cases = {
        "raw text, a method that needs questions": (dict(method="idk", data="muse_news", forget="forget"),
                                                   "is raw text, but the idk loss needs questions"),
        "vision, a text-only method": (dict(method="task_vector", data="clear"), "not available with --data clear"),
        "eval-every, a method that does not train": (dict(method="task_vector", eval_tasks=["t"], eval_every=1),
                                                     "does not train step by step"),
        "eval-every on vision data": (dict(method="graddiff", data="clear", eval_tasks=["t"], eval_every=1),
                                      "--eval-every is not available with --data clear"),
    }
    for name, (options, message) in cases.items():
        out = tmp_path / name.replace(" ", "_").replace(",", "")
        cfg = load_run_config(None, model=str(tmp_path / "no-model"), out=str(out), progress=False, **options)
        with pytest.raises(UnlearningFailed, match=message):
            train(cfg)
        assert not out.exists() and not out.with_name(out.name + ".partial").exists(), name
