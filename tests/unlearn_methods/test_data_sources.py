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
