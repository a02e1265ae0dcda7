"""`unlearn run --data lume`: the forget / retain texts of the selected sub-tasks, then a short run on the tiny model
whose checkpoint the LUME tasks evaluate, on the project's own fixture in the release's schema."""

import pytest

from fixtures.lume import rows, write_lume_corpus
from unlearn_methods.config import load_run_config
from unlearn_methods.data_sources import data_source
from unlearn_tasks.dataset_loader import DataError


@pytest.fixture(scope="module")
def lume_dir(tmp_path_factory):
    return write_lume_corpus(tmp_path_factory.mktemp("lume"), "github")


def _cfg(tmp_path, data_dir, **kw):
    return load_run_config(None, method=kw.pop("method", "ga"), model=str(kw.pop("model", "m")),
                           out=str(tmp_path / "out"), data="lume", data_dir=str(data_dir), **kw)


def test_forget_and_retain_are_the_items_texts_of_the_selected_subtasks(tmp_path, lume_dir):
    cfg = _cfg(tmp_path, lume_dir, lume_subtask=[2])
    assert data_source("lume").name == "lume" and cfg.source.text
    cfg.source.resolve_splits(cfg)
    forget, retain = cfg.source.load(cfg, cfg.data_dir)
    assert forget == [{"text": r["input"] + r["output"]} for r in rows("forget") if r["task"] == "Task2"]
    assert retain == [{"text": r["input"] + r["output"]} for r in rows("retain") if r["task"] == "Task2"]
    cfg = _cfg(tmp_path, lume_dir)
    assert len(cfg.source.load(cfg, cfg.data_dir)[0]) == 6  # all three sub-tasks by default
    with pytest.raises(DataError, match="No LUME forget set"):
        cfg.source.load(cfg, str(tmp_path))
    with pytest.raises(ValueError, match="--lume-subtask must be 1, 2 or 3"):
        _cfg(tmp_path, lume_dir, lume_subtask=[4])


def test_forget_and_retain_other_than_lumes_sets_are_refused(tmp_path, lume_dir):
    cfg = _cfg(tmp_path, lume_dir, forget="forget", retain="retain")
    cfg.source.resolve_splits(cfg)
    assert (cfg.forget, cfg.retain) == ("forget", "retain")
    with pytest.raises(ValueError, match=r"^--forget 'nonsense': LUME's forget set is 'forget' \(leave --forget out\); "
                                         "--lume-subtask and --lume-split choose its rows.$"):
        _cfg(tmp_path, lume_dir, forget="nonsense")
    with pytest.raises(ValueError, match=r"^--retain 'retain90': LUME's retain set is 'retain'"):
        _cfg(tmp_path, lume_dir, retain="retain90")


def test_a_file_that_is_not_utf8_is_named(tmp_path):
    from unlearn_tasks.dataset_loader import DataError

    folder = write_lume_corpus(tmp_path / "lume", "github")
    bad = folder / "data" / "retain.jsonl"
    bad.write_bytes(bad.read_bytes() + b'{"id": "x", "input": "\xff", "output": "o", "task": "Task1"}\n')
    with pytest.raises(DataError, match=rf"^{bad} is not UTF-8 text \(byte 0xff at offset \d+\); save it as UTF-8\.$"):
        _cfg(tmp_path, folder).source.load(_cfg(tmp_path, folder), str(folder))


def test_unlearning_a_subtask_gives_a_checkpoint_the_lume_tasks_evaluate(tmp_path, lume_dir, tiny_model_dir):
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    from harness_ext import tasks_dir
    from unlearn_methods.training import train

    trained = train(_cfg(tmp_path, lume_dir, model=tiny_model_dir, lume_subtask=[1], epochs=1, batch_size=2,
                         lora=False, progress=False))
    saved = (trained.out / "unlearn_config.yaml").read_text()
    assert "lume_subtask:\n- 1" in saved and "data: lume" in saved
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                     metadata={"data_dir": str(lume_dir), "lume_max_tokens": 2})
    out = simple_evaluate(model="hf", model_args=f"pretrained={trained.out},dtype=float32", tasks=["lume_task1"],
                          task_manager=tm, device="cpu", batch_size=8, bootstrap_iters=0)
    metrics = out["results"]["lume_task1"]
    assert {"forget_regurgitation,none", "retain_knowledge,none"} <= set(metrics)
    assert all(0.0 <= metrics[f"{s}_{k},none"] <= 1.0 for s in ("forget", "retain")
               for k in ("regurgitation", "knowledge"))
