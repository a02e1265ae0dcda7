"""Issue 26 on MUSE: open-unlearning's optional MUSE metrics, the GradNorm MIA on the PrivLeak passages (hf only),
the reference MIA from the retrained model's logged per-passage losses, and gibberish of the forget VerbMem
generations, each against a hand computation or an independent one on the tiny model."""

import json
import math

import pytest
from lm_eval.tasks import TaskManager

from fixtures.classifier import build_constant_classifier
from fixtures.open_unlearning import mia_entry
from fixtures.runs import reference_stand_in
from harness_ext import tasks_dir
from harness_ext.evaluate import run_lm_eval
from harness_ext.request_types import ANSWER_GRADNORM
from unlearn_tasks.muse import aggregate
from unlearn_tasks.muse.reference import load_reference
from unlearn_tasks.reference_logs import ReferenceLogError

RECORDS = [{"set": "privleak_forget", "index": 1, "mia_loss": 2.0, "mia_gradnorm": 3.0},
           {"set": "privleak_forget", "index": 0, "mia_loss": 3.0, "mia_gradnorm": 1.0},
           {"set": "privleak_holdout", "index": 0, "mia_loss": 1.0, "mia_gradnorm": 2.0},
           {"set": "privleak_holdout", "index": 1, "mia_loss": 4.0, "mia_gradnorm": 4.0}]


def _load(name, **metadata):
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    return tm.load([name])["tasks"][name]


def test_the_three_metrics_are_opt_in_and_named(muse_data_dir, tmp_path):
    plain = _load("muse_news", data_dir=str(muse_data_dir)).metric_names()
    assert not {"mia_gradnorm_auc", "mia_reference_auc", "forget_gibberish"} & set(plain)
    assert aggregate.metric_names(["verbmem", "privleak"], True, True, True)[-2:] == ["mia_gradnorm_auc",
                                                                                      "mia_reference_auc"]
    assert "forget_gibberish" in aggregate.metric_names(["verbmem"], gibberish=True)
    assert "forget_gibberish" not in aggregate.metric_names(["privleak"], gibberish=True)  # needs the generations
    with pytest.raises(ValueError, match="does not exist"):
        _load("muse_news", data_dir=str(muse_data_dir), gibberish=str(tmp_path / "none"))


def test_auroc_of_both_attacks_by_hand():
    # reference MIA: scores (loss - reference loss): forget 3-1 = 2 (index 0), 2-1.5 = 0.5; holdout 1-0.5 = 0.5,
    # 4-1 = 3. Pairs with holdout > forget: (0.5 vs 2) no, (0.5 vs 0.5) a tie = 1/2, (3 vs 2) yes, (3 vs 0.5) yes
    losses = {"forget": [1.0, 1.5], "holdout": [0.5, 1.0]}
    out = aggregate.compute_metrics(RECORDS, ["privleak"], None, losses, gradnorm=True, reference_mia=True)
    assert out["mia_reference_auc"] == pytest.approx(2.5 / 4)
    # GradNorm: forget {3, 1}, holdout {2, 4}: holdout > forget in 3 of 4 pairs (2 > 1, 4 > 3, 4 > 1)
    assert out["mia_gradnorm_auc"] == pytest.approx(0.75)
    assert math.isnan(aggregate.reference_mia_auc(RECORDS, {"forget": [1.0], "holdout": [0.5, 1.0]}))
    assert "mia_gradnorm_auc" not in aggregate.compute_metrics(RECORDS, ["privleak"], None)


def test_runs_log_their_losses_and_open_unlearning_logs_are_read(tmp_path):
    record = aggregate.reference_record(RECORDS, {}, "news", {})
    assert record["mia_loss"] == {"forget": [3.0, 2.0], "holdout": [1.0, 4.0]}  # item order
    ou = {"mia_min_k": {"agg_value": 0.5}, "mia_loss": mia_entry([1.5, 2.5], [4.0, 0.5], 0.5)}
    (tmp_path / "MUSE_EVAL.json").write_text(json.dumps(ou))
    assert load_reference(str(tmp_path), "news").losses == {"forget": [1.5, 2.5], "holdout": [4.0, 0.5]}
    assert load_reference("published", "news").losses is None and load_reference(0.5, "news").losses is None


def test_a_reference_without_losses_is_refused_with_how_to_produce_one(muse_data_dir, tmp_path):
    for given, why in ((None, "needs a reference run and none was given"),
                       ("published", "the reference published holds none"), (0.5, "the reference 0.5 holds none")):
        with pytest.raises(ReferenceLogError) as e:
            _load("muse_news_privleak", data_dir=str(muse_data_dir), mia_reference=True, reference=given)
        message = str(e.value)
        assert "\n" not in message and why in message and "--tasks muse_news_privleak --output_path REF_DIR" in message
    (tmp_path / "MUSE_EVAL.json").write_text(json.dumps({"mia_min_k": {"agg_value": 0.5}}))
    with pytest.raises(ReferenceLogError, match=f"the reference {tmp_path} holds none"):
        _load("muse_news_privleak", data_dir=str(muse_data_dir), mia_reference=True, reference=str(tmp_path))
    _load("muse_news_privleak", data_dir=str(muse_data_dir), reference="published")  # without mia_reference: as before
    # the fixture has 4 forget and 6 holdout passages: a log of other counts is refused, the right counts accepted
    ou = {"mia_min_k": {"agg_value": 0.5}, "mia_loss": mia_entry([1.0] * 4, [1.0] * 5, 0.5)}
    (tmp_path / "MUSE_EVAL.json").write_text(json.dumps(ou))
    with pytest.raises(ReferenceLogError, match="logged 4 forget / 5 holdout for 4 / 6 here"):
        _load("muse_news_privleak", data_dir=str(muse_data_dir), mia_reference=True, reference=str(tmp_path))
    ou["mia_loss"] = mia_entry([1.0] * 4, [1.0] * 6, 0.5)
    (tmp_path / "MUSE_EVAL.json").write_text(json.dumps(ou))
    task = _load("muse_news_privleak", data_dir=str(muse_data_dir), mia_reference=True, reference=str(tmp_path))
    assert "mia_reference_auc" in task.metric_names()


def test_gradnorm_requests_equal_an_independent_backward_pass(muse_data_dir, muse_tiny_model_dir):
    """One GradNorm request per PrivLeak passage, open-unlearning's window (every passage token after BOS but the
    last), and through lm-eval's hf backend the value of a direct backward pass."""
    import torch
    from lm_eval.models.huggingface import HFLM

    task = _load("muse_news_privleak", data_dir=str(muse_data_dir), mia_gradnorm=True)
    task.build_all_requests(rank=0, world_size=1, limit=2)
    grad = [i for i in task.instances if i.request_type == ANSWER_GRADNORM]
    assert len(grad) == len({i.doc["id"] for i in task.instances})  # one per passage
    assert grad[0].args[2] == {"append_eos": False, "drop_eos": True, "train_mode": True, "p": 2}
    lm = HFLM(pretrained=str(muse_tiny_model_dir), device="cpu", batch_size=2, dtype="float32")
    got = lm.unlearn_answer_gradnorm(grad[:2])
    model = lm.model
    for inst, value in zip(grad[:2], got, strict=True):
        ids = [lm.tokenizer.bos_token_id, *lm.tokenizer.encode(inst.doc["text"], add_special_tokens=False)]
        model.zero_grad(set_to_none=True)
        logits = model(torch.tensor([ids[:-1]])).logits[0].float()
        lps = torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids[1:])[:, None]).squeeze(-1)[:-1]
        (-lps.mean()).backward()
        expected = torch.stack([q.grad.norm(p=2) for q in model.parameters() if q.grad is not None]).mean()
        model.zero_grad(set_to_none=True)
        assert value == pytest.approx(float(expected), rel=1e-5)
    assert not model.training  # the mode restored


def test_gibberish_of_the_forget_verbmem_generations(muse_data_dir, tmp_path):
    classifier = build_constant_classifier(tmp_path / "classifier")
    task = _load("muse_news_verbmem", data_dir=str(muse_data_dir), gibberish=str(classifier))
    records = [{"set": "verbmem_forget", "index": i, "generation": " the cat sat ", "rougeL_f1": 0.5} for i in range(2)]
    assert task.compute_metrics(records)["forget_gibberish"] == pytest.approx(0.75)  # softmax(log 3, 0)[0]


@pytest.mark.slow
def test_lm_eval_reports_both_mias_against_a_reference_run(muse_tiny_model_dir, muse_data_dir, tmp_path):
    """End to end on hf: the model against a run of itself (under another name) has loss - reference loss = 0 for
    every passage, so the reference MIA is exactly 0.5; GradNorm is an AUROC."""
    run_lm_eval(muse_tiny_model_dir, ["muse_news_privleak"], tmp_path / "ref_run", {"data_dir": str(muse_data_dir)},
                batch_size=8)
    reference_stand_in(tmp_path / "ref_run", "muse_news_privleak", tmp_path / "ref", "retrained-model")
    res = run_lm_eval(muse_tiny_model_dir, ["muse_news_privleak"], tmp_path / "out",
                      {"data_dir": str(muse_data_dir), "reference": str(tmp_path / "ref"), "mia_reference": True,
                       "mia_gradnorm": True}, batch_size=8)
    values = res["results"]["muse_news_privleak"]
    assert values["mia_reference_auc,none"] == pytest.approx(0.5)
    assert 0.0 <= values["mia_gradnorm_auc,none"] <= 1.0


def test_the_metrics_reach_the_report_and_the_ci_grammar(muse_data_dir, tmp_path):
    """`unlearn report` (Markdown, --json, --html) shows a run's new MUSE metrics, and a suite may check them
    when its metadata turns them on (the grammar takes a task's metric names from the task)."""
    from fixtures.runs import write_results
    from unlearn_app.ci.runner import task_metric_names
    from unlearn_app.ci.suite import SuiteError, parse_suite, validate_checks
    from unlearn_app.cli import main

    new = {"mia_gradnorm_auc": 0.625, "mia_reference_auc": 0.375, "forget_gibberish": 0.875}
    run = write_results(tmp_path / "run", {"muse_news": {"forget_verbmem": 0.5, "privleak": -12.5, **new}})
    out, html, md = tmp_path / "r.json", tmp_path / "r.html", tmp_path / "r.md"
    assert main(["report", str(run.parent), "--json", str(out), "--html", str(html), "--out", str(md)]) == 0
    assert {k: v for k, v in json.loads(out.read_text())["model"]["muse_news"].items() if k in new} == new
    page, table = html.read_text(), md.read_text()
    assert all(name in page and name in table for name in new)
    assert "0.625" in table and "0.375" in table and "0.875" in table
    suite = parse_suite("tasks: [muse_news]\nchecks:\n  - muse_news/mia_gradnorm_auc <= 0.6\n"
                        "  - muse_news/mia_reference_auc <= 0.6\n  - muse_news/forget_gibberish >= 0.5\n", "s.yaml")
    classifier = build_constant_classifier(tmp_path / "classifier")
    task = _load("muse_news", data_dir=str(muse_data_dir), mia_gradnorm=True, gibberish=str(classifier),
                 mia_reference=True, reference=str(_ou_reference(tmp_path / "ref")))
    validate_checks(suite, {"muse_news": task_metric_names(task)})
    with pytest.raises(SuiteError, match="muse_news has no metric 'mia_gradnorm_auc'"):
        validate_checks(suite, {"muse_news": task_metric_names(_load("muse_news", data_dir=str(muse_data_dir)))})


def _ou_reference(folder):
    """An OU MUSE_EVAL.json with the LOSS attack's per-passage losses for the fixture's 4 forget / 6 holdout."""
    folder.mkdir()
    ou = {"mia_min_k": {"agg_value": 0.5}, "mia_loss": mia_entry([1.0] * 4, [1.0] * 6, 0.5)}
    (folder / "MUSE_EVAL.json").write_text(json.dumps(ou))
    return folder
