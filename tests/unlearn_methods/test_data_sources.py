"""`unlearn run --data NAME`: one registered source per kind of data, each with its own names, splits and loading."""

import pytest

from unlearn_methods import data_sources
from unlearn_methods.config import RunConfig
from unlearn_methods.data_sources import DataSource, data_source, register
from unlearn_methods.scaffolding.tofu_corpus import build_corpus


@pytest.mark.parametrize("data, name, dataset", [
    ("tofu", "tofu", "locuslab/TOFU"), ("demo", "tofu", "demo"), ("me/my-tofu", "tofu", "me/my-tofu"),
    ("evaldu", "evaldu", "evaldu"), ("muse_news", "muse", "muse-bench/MUSE-News"),
    ("muse_books", "muse", "muse-bench/MUSE-Books"), ("clear", "clear", "therem/CLEAR"),
    ("rwku", "rwku", "jinzhuoran/RWKU"),
])
def test_each_data_value_has_its_source(data, name, dataset):
    source = data_source(data)
    assert source.name == name and source.dataset(data) == dataset
    cfg = RunConfig(model="m", out="o", data=data)
    assert cfg.dataset == dataset and cfg.text_data == (name == "muse") and cfg.source.vision == (name == "clear")


@pytest.mark.parametrize("data, given, forget, retain", [
    ("tofu", dict(forget="forget05"), "forget05", "retain95"),
    ("clear", dict(forget="forget10"), "forget10", "retain90"),
    ("muse_news", dict(forget="forget"), "forget", "retain1"),
    ("muse_news", dict(forget="forget", retain="retain2"), "forget", "retain2"),
    ("evaldu", dict(evaldu_target=272), "evaldu_fact_272", "evaldu_other_facts"),
    ("evaldu", dict(evaldu_target=272, evaldu_minimal_set=True), "evaldu_fact_272_minimal_set", "evaldu_other_facts"),
])
def test_each_source_names_its_splits(data, given, forget, retain):
    cfg = RunConfig(model="m", out="o", data=data, **given)
    cfg.source.resolve_splits(cfg)
    assert (cfg.forget, cfg.retain) == (forget, retain)


def test_the_tofu_source_reads_the_demo_corpus(tmp_path, demo_data_dir):
    cfg = RunConfig(model="m", out="o", data="demo", forget="forget01")
    source = cfg.source
    source.resolve_splits(cfg)
    data_dir = source.local_data(cfg, tmp_path)  # no --data-dir: the demo corpus is written under the output
    assert data_dir == str(tmp_path / "demo_data")
    forget, retain = source.load(cfg, data_dir)
    corpus = build_corpus()
    assert forget == corpus["forget01"] and retain == corpus["retain99"] and len(retain) == 234


def test_a_new_source_is_one_registered_class():
    @register
    class Toy(DataSource):
        name = "toy"
        help = "'toy' (a test)"

    try:
        assert data_source("toy").name == "toy" and data_source("tofu").name == "tofu"
        assert data_sources.data_help().endswith("; 'toy' (a test).")
    finally:
        data_sources.SOURCES.remove(next(s for s in data_sources.SOURCES if s.name == "toy"))
    assert data_source("toy").name == "tofu"  # gone again: any other value is a Hub id in TOFU's schema


def test_a_toy_source_with_its_own_option_touches_no_other_file(tmp_path, capsys):
    """A data source declares its options as a method declares its Params: the flag, the --config key, the check
    of its range, --help and the saved configuration come from the declaration; nothing else names it."""
    from dataclasses import dataclass

    from unlearn_app.cli import build_parser
    from unlearn_methods.config import load_run_config
    from unlearn_methods.params import option

    @register
    class Toy(DataSource):
        name = "toy"
        help = "'toy' (a test)"

        @dataclass
        class Options:
            toy_repeats: int = option(2, "With --data toy: how often each forget record is shown.", gt=0,
                                      unit="repeats", resume=True)

        def load(self, cfg, data_dir):
            return [{"question": "q", "answer": "a"}] * cfg.options.toy_repeats, [{"question": "r", "answer": "b"}]

    try:
        cfg = load_run_config(None, model="m", out="o", data="toy", toy_repeats=3)
        assert cfg.toy_repeats == 3 and cfg.options.toy_repeats == 3
        assert len(cfg.source.load(cfg, None)[0]) == 3
        assert cfg.to_dict()["toy_repeats"] == 3  # saved with the run, compared by --resume
        path = tmp_path / "c.yaml"
        path.write_text("model: m\nout: o\ndata: toy\ntoy_repeats: 0\n")
        with pytest.raises(ValueError, match=r"c.yaml:4: toy_repeats: must be a positive number of repeats, got 0"):
            load_run_config(path)
        with pytest.raises(ValueError, match="--toy-repeats applies to --data toy only, not --data tofu"):
            load_run_config(None, model="m", out="o", data="tofu", toy_repeats=3)
        args = build_parser().parse_args(["run", "--model", "m", "--out", "o", "--data", "toy", "--toy-repeats", "4"])
        from unlearn_app.commands.run import option_values

        assert option_values(args)["toy_repeats"] == 4
        with pytest.raises(SystemExit):
            build_parser().parse_args(["run", "--help"])
        assert "--toy-repeats" in capsys.readouterr().out
        assert load_run_config(None, model="m", out="o").toy_repeats == 2  # the default, for every other source
    finally:
        data_sources.SOURCES.remove(next(s for s in data_sources.SOURCES if s.name == "toy"))


def test_a_source_option_s_help_names_its_source():
    """A source's options are declared without the "With --data NAME:" of their --help: it comes from the source;
    a help naming a narrower condition itself ("With --rwku-corpus generated: ...") keeps it."""
    from dataclasses import dataclass

    from unlearn_methods.config import run_fields, source_fields
    from unlearn_methods.params import option

    @register
    class Toy(DataSource):
        name = "toy"
        help = "'toy' (a test)"

        @dataclass
        class Options:
            toy_repeats: int = option(2, "How often each forget record is shown.", gt=0)

    try:
        helps = {f.name: f.metadata["help"] for f in run_fields()}
        assert helps["toy_repeats"] == "With --data toy: how often each forget record is shown."
        assert Toy.Options.__dataclass_fields__["toy_repeats"].metadata["help"] == "How often each forget record is shown."
        assert helps["modality"].startswith("With --data clear or mllmu: unlearn from the people's text rows")
        assert helps["rwku_decoding"].startswith("With --rwku-corpus generated: ")
        assert all(helps[name].startswith("With --") for name in source_fields())
    finally:
        data_sources.SOURCES.remove(next(s for s in data_sources.SOURCES if s.name == "toy"))
