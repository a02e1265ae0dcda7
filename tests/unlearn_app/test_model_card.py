"""The model card's "How to evaluate" line comes from the run's data source (its declared ``eval_model`` and
``eval_args``): a MUSE run is evaluated with ``muse_news``, not ``tofu_forget``."""

import re
import shlex

import pytest

from harness_ext.evaluate import unknown_tasks
from unlearn_app.checkpoint import model_card
from unlearn_methods.config import RunConfig
from unlearn_methods.data_sources import SOURCES

#: (run options, the line by hand) for every source: adapter runs name the base model too.
CASES = {
    "tofu": ({"data": "tofu", "forget": "forget05"},
             "lm_eval --model hf --model_args pretrained=THIS_REPO --tasks tofu_forget05"),
    "muse": ({"data": "muse_news", "forget": "forget"},
             "lm_eval --model hf --model_args pretrained=THIS_REPO --tasks muse_news"),
    "evaldu": ({"data": "evaldu", "evaldu_target": 272, "data_dir": "kb"},
               "lm_eval --model hf --model_args pretrained=THIS_REPO --tasks evaldu "
               """--metadata '{"data_dir": "EVALDU_DIR", "target": 272}'"""),
    "clear": ({"data": "clear", "forget": "forget10"},
              "lm_eval --model hf-multimodal --model_args pretrained=THIS_REPO --tasks clear_forget10"),
    "mllmu": ({"data": "mllmu", "forget": "forget15"},
              "lm_eval --model hf-multimodal --model_args pretrained=THIS_REPO --tasks mllmu_forget15"),
    "rwku": ({"data": "rwku", "rwku_target": ["Orla Venn"], "data_dir": "RWKU_FIXTURE"},
             "lm_eval --model hf --model_args pretrained=THIS_REPO --tasks rwku "
             """--metadata '{"rwku_targets": ["Orla Venn"]}'"""),
    "lume": ({"data": "lume", "lume_subtask": [2]},
             "lm_eval --model hf --model_args pretrained=THIS_REPO --tasks lume "
             """--metadata '{"lume_split": "train"}'"""),
    "dusk": ({"data": "dusk"}, "lm_eval --model hf --model_args pretrained=THIS_REPO --tasks dusk"),
    "knowundo": ({"data": "knowundo", "knowundo_domain": "privacy"},
                 "lm_eval --model hf --model_args pretrained=THIS_REPO --tasks knowundo_privacy"),
    "blur": ({"data": "blur", "blur_source": "whp", "blur_references": "refs/BASE"},
             "lm_eval --model hf --model_args pretrained=THIS_REPO --tasks blur_whp "
             """--metadata '{"blur_references": "refs/BASE"}'"""),
}


@pytest.fixture(autouse=True)
def _rwku_fixture_folder(monkeypatch, tmp_path_factory):
    """RWKU's options name its targets, checked against the data: the project's fixture stands in for the Hub."""
    from fixtures.rwku import write_rwku_corpus

    folder = str(write_rwku_corpus(tmp_path_factory.mktemp("rwku"), "hub"))
    monkeypatch.setitem(CASES, "rwku", ({**CASES["rwku"][0], "data_dir": folder}, CASES["rwku"][1]))


def _card(adapter: bool = False, **options) -> str:
    cfg = RunConfig(model="org/base", out="o", **options)
    cfg.source.resolve_splits(cfg)
    return model_card.render(cfg, {}, "a summary", {}, adapter=adapter)


def _line(card: str) -> str:
    return re.search(r"## How to evaluate\n\n```bash\n(.*)\n```", card).group(1)


def test_every_data_source_has_a_case_here():
    assert {s.name for s in SOURCES} == set(CASES)


@pytest.mark.parametrize("source", sorted(CASES))
def test_how_to_evaluate_names_the_tasks_of_the_runs_data(source):
    options, line = CASES[source]
    assert _line(_card(**options)) == line
    assert _line(_card(adapter=True, lora=True, **options)) == line.replace(
        "pretrained=THIS_REPO", "pretrained=org/base,peft=THIS_REPO")


def test_muse_books_by_hub_id():
    assert _line(_card(data="muse-bench/MUSE-Books", forget="scal/forget_2")).endswith("--tasks muse_books")


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.name)
def test_each_sources_evaluation_names_tasks_lm_eval_knows(source):
    """Whatever a source declares (a new one too) names tasks that exist, with --metadata a JSON object."""
    options = CASES.get(source.name, ({"data": source.name},))[0]
    args = shlex.split(_line(_card(**options)).split(" --model_args ")[1])[1:]
    tasks = args[args.index("--tasks") + 1].split(",")
    assert unknown_tasks(tasks) == []
    if "--metadata" in args:
        import json

        assert isinstance(json.loads(args[args.index("--metadata") + 1]), dict)
