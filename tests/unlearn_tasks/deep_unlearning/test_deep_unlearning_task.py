"""The evaldu / mquake_du lm-eval tasks and the ``unlearn deep-unlearning`` command line."""

import json
import math
from pathlib import Path

import pytest
from lm_eval.tasks import TaskManager

from fixtures.shared_data import SHARED_DATA
from harness_ext import tasks_dir
from harness_ext.evaluate import run_lm_eval
from unlearn_app.cli import main
from unlearn_tasks.deep_unlearning import load_evaldu, score, write_generated_evaldu

RELEASE_DIR = SHARED_DATA / "deep_unlearning"
METRICS = ("success_du", "recall", "acc_relationships", "acc_biographies", "acc_all")


@pytest.fixture(scope="module")
def small_kb_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("evaldu_small")
    write_generated_evaldu(directory, 12, seed=0, n_targets=5)
    return directory


def _load(name, **metadata):
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    return tm.load([name])["tasks"][name]


def test_tasks_are_indexed():
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False)
    assert {"evaldu", "mquake_du"} <= set(tm.all_tasks)


def test_requests_and_corpus_metrics(small_kb_dir):
    kb = load_evaldu(small_kb_dir)
    task = _load("evaldu", data_dir=str(small_kb_dir), target=kb.targets[0])
    docs = list(task.test_docs())
    assert len(docs) == kb.n_relationships + kb.n_biographies
    task.build_all_requests(limit=1, rank=0, world_size=1)
    (inst,) = task.instances
    assert inst.request_type == "generate_until"
    assert inst.args[0] == f"Question: {docs[0]['question']}\n"
    assert inst.args[1]["max_gen_toks"] == 10 and inst.args[1]["do_sample"] is False
    # answer every other fact correctly (substring, any case); metrics equal the engine's score()
    records, rel, bio = [], [False] * kb.n_relationships, [False] * kb.n_biographies
    for n, doc in enumerate(docs):
        right = n % 2 == 0
        (rel if doc["kind"] == "relationship" else bio)[doc["index"]] = right
        out = task.process_results(doc, [f" {doc['answer'].upper()} ..." if right else " no idea"])
        records.append(out["recall"])
    metrics = {m: task.aggregation()[m](records) for m in METRICS}
    expected = score(rel, bio, kb.targets[0], kb)
    assert metrics == {m: expected[m] for m in METRICS}
    dumped = task.dump_config()["deep_unlearning"]
    assert dumped["relationships"] == rel and dumped["biographies"] == bio and dumped["target"] == kb.targets[0]


def test_missing_knowledge_base_says_what_to_pass(monkeypatch):
    monkeypatch.delenv("UNLEARN_DATA_DIR", raising=False)
    with pytest.raises(ValueError, match="data_dir"):
        _load("evaldu")
    with pytest.raises(ValueError, match="mquake_path"):
        _load("mquake_du")


@pytest.mark.slow
def test_end_to_end_all_targets_from_one_run(tiny_model_dir, small_kb_dir, tmp_path):
    results = run_lm_eval(tiny_model_dir, ["evaldu"], tmp_path / "run", metadata={"data_dir": str(small_kb_dir)},
                          batch_size=32)
    values = results["results"]["evaldu"]
    for m in METRICS:
        assert 0.0 <= values[f"{m},none"] <= 1.0, m
    (file,) = (tmp_path / "run").rglob("results_*.json")
    record = json.loads(file.read_text())["configs"]["evaldu"]["deep_unlearning"]
    kb = load_evaldu(small_kb_dir)
    assert len(record["relationships"]) == kb.n_relationships and len(record["biographies"]) == kb.n_biographies
    assert [s["target"] for s in record["per_target"]] == kb.targets
    assert math.isclose(values["recall,none"], sum(s["recall"] for s in record["per_target"]) / len(kb.targets))


@pytest.mark.skipif(not RELEASE_DIR.is_dir(), reason="../shared/data/deep_unlearning not present")
def test_cli_score_reproduces_worked_example(tmp_path, capsys):
    example = json.loads((RELEASE_DIR / "example_for_evaluation.json").read_text())
    (tmp_path / "r.json").write_text(json.dumps(example["relationships_correct"]))
    (tmp_path / "b.json").write_text(json.dumps(example["biographies_correct"]))
    code = main(["deep-unlearning", "score", "--relationships", str(tmp_path / "r.json"), "--biographies",
                 str(tmp_path / "b.json"), "--target", str(example["target_fact_id"]), "--kb", str(RELEASE_DIR)])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    for key, value in example["expected_rec_acc"].items():
        assert out[key] == value, key
    # success_du is exact: 1 iff the target is not derivable from the facts the model still answers correctly
    kb = load_evaldu(RELEASE_DIR)
    forgotten = [i for i, ok in enumerate(example["relationships_correct"]) if not ok]
    derivable = kb.closure().is_derivable(example["target_fact_id"], forgotten)
    assert out["success_du"] == float(not derivable)


def test_cli_score_rejects_bad_input(small_kb_dir, tmp_path, capsys):
    (tmp_path / "r.json").write_text(json.dumps([True, False]))
    code = main(["deep-unlearning", "score", "--relationships", str(tmp_path / "r.json"), "--target", "0",
                 "--kb", str(small_kb_dir)])
    assert code == 2 and "entries" in capsys.readouterr().err


def _fake_run(directory: Path, kb_dir: Path, rel: list, bio: list) -> Path:
    directory.mkdir(parents=True)
    record = {"knowledge_base": "x", "path": str(kb_dir), "target": None, "relationships": rel, "biographies": bio}
    data = {"results": {"evaldu": {}}, "configs": {"evaldu": {"task": "evaldu", "deep_unlearning": record}}}
    (directory / "results_2026-01-01T00-00-00.json").write_text(json.dumps(data))
    return directory


def test_cli_sweep_two_runs(small_kb_dir, tmp_path, capsys):
    kb = load_evaldu(small_kb_dir)
    light = _fake_run(tmp_path / "light", small_kb_dir, [True] * kb.n_relationships, [True] * kb.n_biographies)
    heavy = _fake_run(tmp_path / "heavy", small_kb_dir, [False] * kb.n_relationships, [True] * kb.n_biographies)
    png = tmp_path / "sweep.png"
    assert main(["deep-unlearning", "sweep", str(light), str(heavy), "--plot", str(png)]) == 0  # kb from the file
    out = json.loads(capsys.readouterr().out)
    assert out["num_targets"] == len(kb.targets) and out["num_points"] == 2 * len(kb.targets)
    assert out["runs"]["light"]["recall"] == 0.0 and out["runs"]["heavy"]["recall"] == 1.0
    assert out["runs"]["heavy"]["success_du"] == 1.0 and out["runs"]["light"]["success_du"] == 0.0
    for key in ("success_du_at_acc", "recall_at_acc", "acc_at_recall", "ar_auc"):
        assert 0.0 <= out[key] <= 1.0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["deep-unlearning", "sweep", str(tmp_path / "nothing")]) == 2


def test_mquake_du_scores_composed_targets(tmp_path):
    from test_deep_unlearning import MQUAKE_FIXTURE

    path = tmp_path / "MQuAKE-fixture.json"
    path.write_text(json.dumps(MQUAKE_FIXTURE))
    task = _load("mquake_du", mquake_path=str(path))
    docs = list(task.test_docs())
    assert {d["kind"] for d in docs} == {"relationship"}
    records = [task.process_results(d, ["nothing"])["recall"] for d in docs]  # every fact forgotten
    metrics = {m: task.aggregation()[m](records) for m in METRICS}
    assert metrics["recall"] == 1.0 and metrics["success_du"] == 1.0
    assert math.isnan(metrics["acc_biographies"])  # MQuAKE has no biography facts
