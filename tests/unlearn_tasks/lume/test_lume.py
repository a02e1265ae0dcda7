"""LUME (SemEval-2025 Task 4): the official script's scores by hand, the release's layouts, and the ``lume`` group on
the tiny model with an MMLU-shaped fixture, whose row carries the task's aggregate computed from both."""

import json
import math
import statistics

import pytest
from lm_eval.tasks import TaskManager

from fixtures.lume import rows, write_lume_corpus, write_mmlu_fixture
from harness_ext import tasks_dir
from harness_ext.group_scores import add_group_scores, plain_metrics
from unlearn_tasks.dataset_loader import DataError
from unlearn_tasks.lume.data import build_docs, item_kind
from unlearn_tasks.lume.options import LumeOptions
from unlearn_tasks.lume.scoring import (
    exact_match,
    harmonic_mean,
    lume_scores,
    mia_auc,
    mia_score,
    regurgitation,
    task_aggregate,
)
from unlearn_tasks.lume.task import compute_mia_metrics, compute_subtask_metrics


# ---------------------------------------------------------------------- scores by hand
def test_item_scores_by_hand():
    # LCS("the cat sat on the mat", "the cat ran") = "the cat": 2 of 6 reference words
    assert regurgitation("the cat sat on the mat", "the cat ran") == pytest.approx(2 / 6)
    assert regurgitation("Walking dogs", "walked dog") == 1.0  # Porter stemmer, lower-cased
    assert exact_match("Madera", "  madera \n") == 1.0 and exact_match("Madera", "Madera city") == 0.0
    assert item_kind("\"8f24\"sc1") == "regurgitation" and item_kind("12762334qa0") == "knowledge"
    assert item_kind("12762334xx1") is None


def test_harmonic_mean_and_mia_score_by_hand():
    assert harmonic_mean([0.5, 1.0]) == pytest.approx(2 / 3) == statistics.harmonic_mean([0.5, 1.0])
    assert harmonic_mean([0.9, 0.0, 0.4]) == 0.0 == statistics.harmonic_mean([0.9, 0.0, 0.4])
    assert math.isnan(harmonic_mean([0.5, float("nan")]))
    # member losses 1, 2; nonmember 1.5, 3: a nonmember's loss is higher in 3 of 4 pairs
    assert mia_auc([1.0, 2.0], [1.5, 3.0]) == pytest.approx(0.75)
    assert mia_score(0.75) == pytest.approx(0.5) and mia_score(0.5) == 1.0 and mia_score(0.0) == 0.0
    records = [{"set": "member", "loss": 1.0}, {"set": "nonmember", "loss": 1.5}, {"set": "member", "loss": 2.0},
               {"set": "nonmember", "loss": 3.0}]
    assert compute_mia_metrics(records) == pytest.approx({"mia_loss_auc": 0.75, "mia_score": 0.5,
                                                          "mia_member_loss": 1.5, "mia_nonmember_loss": 2.25})


def test_subtask_means_and_the_aggregate_by_hand():
    records = [{"set": "forget", "kind": "regurgitation", "score": 0.1}, {"set": "forget", "kind": "regurgitation",
               "score": 0.3}, {"set": "forget", "kind": "knowledge", "score": 1.0}, {"set": "forget", "kind":
               "knowledge", "score": 0.0}, {"set": "retain", "kind": "regurgitation", "score": 0.8},
               {"set": "retain", "kind": "knowledge", "score": 0.5}]
    per = compute_subtask_metrics(records)
    assert per == pytest.approx({"forget_regurgitation": 0.2, "forget_knowledge": 0.5, "retain_regurgitation": 0.8,
                                 "retain_knowledge": 0.5})
    tasks = {f"lume_task{n}": per for n in (1, 2, 3)}
    # terms 1-0.2, 1-0.5, 0.8, 0.5 per sub-task: 12 / (3 * (1.25 + 2 + 1.25 + 2)) = 12 / 19.5
    assert task_aggregate(tasks) == pytest.approx(12 / 19.5)
    scores = lume_scores({**tasks, "lume_mia": {"mia_score": 0.5}, "mmlu": {"acc": 0.4}})
    assert scores == pytest.approx({"task_aggregate": 12 / 19.5, "mia_score": 0.5, "mmlu_acc": 0.4,
                                    "final_score": (12 / 19.5 + 0.5 + 0.4) / 3})
    assert math.isnan(lume_scores(tasks)["final_score"])  # no MMLU, no MIA: no final score


#: the leaderboards' rows in task_yaml/lume/README.md: (task aggregate, MIA score, MMLU), final score
BOARD = [((0.827, 0.847, 0.443), 0.706), ((0.944, 0.048, 0.471), 0.487), ((0.834, 0.139, 0.436), 0.470),  # 7B top 3
         ((0.964, 0.857, 0.242), 0.688), ((0.973, 0.741, 0.243), 0.652), ((0.887, 0.622, 0.248), 0.586),  # 1B top 3
         ((0.0, 0.382, 0.348), 0.243), ((0.021, 0.080, 0.463), 0.188)]  # the organisers' GradDiff and NPO on 7B


@pytest.mark.parametrize("parts, final", BOARD)
def test_final_score_is_the_mean_the_leaderboard_publishes(parts, final):
    aggregate, mia, mmlu = parts
    per = {"forget_regurgitation": 1 - aggregate, "forget_knowledge": 1 - aggregate,
           "retain_regurgitation": aggregate, "retain_knowledge": aggregate}
    scores = lume_scores({**{f"lume_task{n}": per for n in (1, 2, 3)}, "lume_mia": {"mia_score": mia},
                          "mmlu": {"acc": mmlu}})
    assert scores["task_aggregate"] == pytest.approx(aggregate)
    assert scores["final_score"] == pytest.approx(final, abs=1e-3)  # the board rounds its parts to 3 digits


def test_report_rows_and_directions():
    from unlearn_app.reports.tables import generic_rows
    from unlearn_tasks.benchmarks import benchmark_of_task

    assert benchmark_of_task("lume_task2").name == benchmark_of_task("lume").name == "lume"
    models = {"a": {"final_score": 0.5, "forget_knowledge": 0.1, "retain_knowledge": 0.9}}
    assert [k for k, _ in generic_rows(models, "lume")] == ["forget_knowledge", "retain_knowledge", "final_score"]
    lower = benchmark_of_task("lume").lower_is_better
    assert {"forget_regurgitation", "forget_knowledge", "mia_loss_auc"} == lower


def test_group_scores_fill_the_groups_row_in_lm_evals_format():
    metrics = {f"lume_task{n}": {f"{m},none": v for m, v in (("forget_regurgitation", 0.2), ("forget_knowledge", 0.5),
               ("retain_regurgitation", 0.8), ("retain_knowledge", 0.5))} for n in (1, 2, 3)}
    metrics.update(lume_mia={"mia_score,none": 0.5, "mia_score_stderr,none": "N/A"}, mmlu={"acc,none": 0.4,
                   "acc_stderr,none": 0.1, "alias": "mmlu"}, lume={"alias": "lume", "name": "lume"})
    assert plain_metrics(metrics)["mmlu"] == {"acc": 0.4}
    add_group_scores(metrics)
    assert metrics["lume"]["final_score,none"] == pytest.approx((12 / 19.5 + 0.5 + 0.4) / 3)
    assert metrics["lume"]["mmlu_acc,none"] == 0.4


# ---------------------------------------------------------------------- data
def test_the_releases_layouts_give_the_same_documents(tmp_path, caplog):
    layouts = ("github", "github_first", "official", "hub")
    folders = {layout: str(write_lume_corpus(tmp_path / layout, layout)) for layout in layouts}
    with caplog.at_level("WARNING", logger="unlearn_tasks.lume.data"):
        task1 = {layout: build_docs(LumeOptions(lume_set="task1", data_dir=folders[layout])) for layout in layouts}
    assert task1["github"] == task1["github_first"] == task1["official"] == task1["hub"]
    # the release's HEAD files hold both folds with nothing to tell them apart: said for each set, only for them
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2 and all("train and validation folds together" in m and "/github/" in m for m in warned)
    task1 = task1["github"]
    assert [d["kind"] for d in task1] == ["regurgitation", "regurgitation", "knowledge", "knowledge"]
    assert task1[0]["id"].startswith('"') and task1[0]["id"].endswith('"sc1')  # the release's quoted UUID ids
    docs = {layout: build_docs(LumeOptions(lume_set="task2", data_dir=folders[layout])) for layout in layouts}
    assert docs["github"] == docs["github_first"] == docs["official"] == docs["hub"]
    assert [(d["set"], d["kind"]) for d in docs["github"]] == [("forget", "regurgitation"), ("retain", "regurgitation"),
                                                               ("forget", "knowledge"), ("retain", "knowledge")]
    assert docs["github"][2]["output"] == "1984-12-31"
    mia = build_docs(LumeOptions(lume_set="mia", data_dir=str(tmp_path / "github")))
    assert [d["set"] for d in mia] == ["member", "nonmember"] * 2


def test_bad_data_gives_one_line_errors(tmp_path):
    folder = write_lume_corpus(tmp_path / "d", "official")
    bad = rows("forget")
    del bad[1]["input"]
    (folder / "forget.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bad))
    with pytest.raises(DataError, match=r"forget\.jsonl: row 2 has no 'input'") as e:
        build_docs(LumeOptions(lume_set="task1", data_dir=str(folder)))
    assert "\n" not in str(e.value)
    (folder / "mia_data" / "nonmember.jsonl").unlink()
    with pytest.raises(DataError, match="nonmember.jsonl.*lume_mia_dir"):
        build_docs(LumeOptions(lume_set="mia", data_dir=str(folder)))
    with pytest.raises(DataError, match="No LUME forget set"):
        build_docs(LumeOptions(lume_set="task1", data_dir=str(tmp_path)))


# ---------------------------------------------------------------------- lm-eval, one invocation
def test_lume_group_with_mmlu_on_the_tiny_model(tmp_path, tiny_model_dir):
    from lm_eval import simple_evaluate

    data = write_lume_corpus(tmp_path / "lume", "github")
    tm = TaskManager(include_path=[str(tasks_dir()), str(write_mmlu_fixture(tmp_path / "mmlu"))],
                     include_defaults=False, metadata={"data_dir": str(data), "lume_max_tokens": 2})
    out = simple_evaluate(model="hf", model_args=f"pretrained={tiny_model_dir},dtype=float32", tasks=["lume"],
                          task_manager=tm, device="cpu", batch_size=16, bootstrap_iters=0, log_samples=True)
    results = out["results"]
    for n in (1, 2, 3):  # each item scored as the official script scores it, from the logged answers
        samples = out["samples"][f"lume_task{n}"]
        assert len(samples) == 4
        for s in samples:
            doc, answer = s["doc"], s["resps"][0][0]
            expected = (regurgitation if doc["kind"] == "regurgitation" else exact_match)(doc["output"], answer)
            assert results[f"lume_task{n}"][f"{doc['set']}_{doc['kind']},none"] == pytest.approx(expected)
    assert 0.0 <= results["mmlu"]["acc,none"] <= 1.0
    _official_steps_agree(tiny_model_dir, out)
    per_task = plain_metrics(results)
    expected = lume_scores(per_task)
    row = results["lume"]
    for name in ("task_aggregate", "mia_score", "mmlu_acc", "final_score"):
        assert row[f"{name},none"] == pytest.approx(expected[name]), name
    assert row["mmlu_acc,none"] == results["mmlu"]["acc,none"]
    assert row["final_score,none"] == pytest.approx((row["task_aggregate,none"] + row["mia_score,none"]
                                                     + row["mmlu_acc,none"]) / 3)


def _official_steps_agree(model_dir, out):
    """The official script's steps, restated: each item's greedy completion with ``generate`` decoded as it decodes
    it is lm-eval's answer; each MIA document's loss is ``model(ids, labels=ids).loss`` on its own tokens."""
    import numpy as np
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    for s in out["samples"]["lume_task1"]:
        ids = tok(s["doc"]["input"], return_tensors="pt").input_ids
        with torch.no_grad():
            gen = model.generate(ids, max_new_tokens=2, do_sample=False, pad_token_id=tok.eos_token_id)
        text = tok.batch_decode(gen[:, ids.shape[1]:], skip_special_tokens=True, clean_up_tokenization_spaces=True)[0]
        assert s["resps"][0][0] == text
    losses = {"member": [], "nonmember": []}
    for s in out["samples"]["lume_mia"]:
        ids = tok(s["doc"]["document"], return_tensors="pt").input_ids
        with torch.no_grad():
            losses[s["doc"]["set"]].append(model(ids, labels=ids).loss.item())
    mia = out["results"]["lume_mia"]
    assert mia["mia_member_loss,none"] == pytest.approx(np.mean(losses["member"]), rel=1e-4)
    assert mia["mia_nonmember_loss,none"] == pytest.approx(np.mean(losses["nonmember"]), rel=1e-4)
    assert mia["mia_loss_auc,none"] == pytest.approx(mia_auc(losses["member"], losses["nonmember"]))
