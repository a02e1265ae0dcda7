"""Our commands' lm-eval task index: our tasks plus only the lm-eval tasks named, built once per process."""

import pytest
from lm_eval.tasks._index import TaskIndex

import harness_ext.task_index as task_index
from harness_ext.evaluate import run_lm_eval, unknown_tasks

TASK = "tofu_forget01_likelihood"
WMDP = {"wmdp", "wmdp_bio", "wmdp_chem", "wmdp_cyber"}  # lm-eval's wmdp folder: one group, three tasks


@pytest.fixture
def builds(monkeypatch) -> list:
    """Fresh caches, and a record of every index lm-eval builds (the paths of each build)."""
    task_index._manager.cache_clear()
    original = TaskIndex.build
    calls: list = []

    def counting(paths, **kwargs):
        calls.append([p.name for p in paths])
        return original(paths, **kwargs)

    monkeypatch.setattr(TaskIndex, "build", staticmethod(counting))
    yield calls
    task_index._manager.cache_clear()


def test_index_is_built_once_across_two_evaluations(builds, tiny_model_dir, demo_data_dir, tmp_path):
    metadata = {"data_dir": str(demo_data_dir)}
    assert unknown_tasks([TASK]) == []
    first = run_lm_eval(tiny_model_dir, [TASK], tmp_path / "a", metadata, limit=2)
    second = run_lm_eval(tiny_model_dir, [TASK], tmp_path / "b", {**metadata, "answer_scoring": "tofu"}, limit=2)
    assert len(builds) == 1 and builds[0] == ["task_yaml"]  # our folder only, indexed once for the three uses
    # each evaluation still got its own options: the TOFU boundary rule drops the first answer token
    assert first["results"][TASK]["forget_prob,none"] != second["results"][TASK]["forget_prob,none"]


def test_index_holds_our_tasks_and_only_the_named_lm_eval_ones(builds):
    manager = task_index.task_manager(["wmdp", TASK], {"pretrained": "m"})
    names = set(manager.all_tasks)
    assert WMDP <= names and {TASK, "tofu_forget10", "tofu"} <= names
    assert "hellaswag" not in names and len(names) == len(task_index.task_manager().all_tasks) + len(WMDP)
    task_index.task_manager(["wmdp_bio"], {"pretrained": "n"})  # same folder: no new index
    assert builds == [["task_yaml"], ["task_yaml", "wmdp"]]


def test_each_manager_gives_its_own_metadata_to_the_tasks_it_builds(builds, demo_data_dir):
    built = {}
    for model in ("model-a", "model-b"):
        manager = task_index.task_manager([TASK], {"data_dir": str(demo_data_dir), "pretrained": model})
        built[model] = manager.load([TASK])["tasks"][TASK].config.metadata["pretrained"]
    assert built == {"model-a": "model-a", "model-b": "model-b"} and len(builds) == 1


def test_a_task_in_a_folder_named_otherwise_is_found_without_the_whole_index(builds):
    """lm-eval keeps boolq in super_glue/boolq: found by reading the YAMLs, not by indexing all of them."""
    names = set(task_index.task_manager(["boolq"]).all_tasks)
    assert "boolq" in names and len(names) < 1000  # lm-eval's whole index holds about 15,000 names
    assert not any("tasks" in b for b in builds)  # lm-eval's own root folder was never indexed


def test_unknown_names_are_named_without_the_whole_index(builds):
    assert unknown_tasks(["tofu_forget11", "wmdp_bio", TASK]) == ["tofu_forget11"]
    assert all(len(task_index.task_manager(b).all_tasks) < 1000 for b in ([], ["wmdp_bio"]))
    assert not any("tasks" in b for b in builds)
