"""The TOFU task inside lm-eval: discovery, requests, corpus metrics, the reference round trip."""

import json
import math

import pytest
from lm_eval.tasks import TaskManager

from fixtures.runs import reference_stand_in
from harness_ext import tasks_dir
from harness_ext.evaluate import run_lm_eval
from unlearn_tasks.tofu.reference import ReferenceLogError

ALL_TASKS = {"tofu", *(f"tofu_forget{s}{v}" for s in ("01", "05", "10") for v in ("", "_rouge", "_likelihood"))}
METRICS = {
    "forget_rougeL_recall", "forget_prob", "forget_truth_ratio", "forget_quality", "retain_rougeL_recall",
    "retain_prob", "retain_truth_ratio", "ra_rougeL_recall", "ra_prob", "ra_truth_ratio", "wf_rougeL_recall",
    "wf_prob", "wf_truth_ratio", "model_utility", "mia_loss_auc", "mia_zlib_auc", "mia_min_k_auc",
    "mia_min_k_plus_plus_auc", "mia_reference_auc", "privleak", "extraction_strength", "exact_memorization",
}


def test_every_yaml_is_indexed():
    """lm-eval silently skips a YAML it cannot parse; make sure all our names are there."""
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False)
    assert ALL_TASKS <= set(tm.all_tasks)


def test_installed_hook_adds_our_folder_without_include_path():
    assert ALL_TASKS <= set(TaskManager(include_defaults=False).all_tasks)


def _load(name, **metadata):
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    return tm.load([name])["tasks"][name]


def test_requests_per_document(demo_data_dir):
    task = _load("tofu_forget01", data_dir=str(demo_data_dir))
    task.build_all_requests(limit=5, rank=0, world_size=1)
    by_doc = {}
    for inst in task.instances:
        by_doc.setdefault(inst.doc["split"], []).append(inst.request_type)
    assert by_doc["forget"] == ["generate_until"] + ["unlearn_answer_logprobs"] * 5  # answer, paraphrase, 3 perturbed
    assert by_doc["ra"] == ["generate_until"] + ["unlearn_answer_logprobs"] * 4
    assert by_doc["holdout"] == ["unlearn_answer_logprobs"]
    forget = next(i for i in task.instances if i.doc["split"] == "forget" and i.request_type == "generate_until")
    assert forget.args[0].startswith("Question: ") and forget.args[0].endswith("\nAnswer:")
    assert forget.args[1]["max_gen_toks"] == 200 and forget.args[1]["do_sample"] is False


def test_generation_only_variant_skips_holdout_and_likelihood(demo_data_dir):
    task = _load("tofu_forget01_rouge", data_dir=str(demo_data_dir))
    assert {d["split"] for d in task.test_docs()} == {"forget", "retain", "ra", "wf"}
    assert set(task.aggregation()) == {"forget_rougeL_recall", "retain_rougeL_recall", "ra_rougeL_recall", "wf_rougeL_recall"}


def test_reference_from_another_split_fails_before_any_compute(demo_data_dir, legacy_logs):
    with pytest.raises(ReferenceLogError, match="this task evaluates forget01"):
        _load("tofu_forget01", data_dir=str(demo_data_dir), reference=str(legacy_logs / "phi_retain95"))


def test_legacy_reference_for_other_questions_is_refused(demo_data_dir, legacy_logs):
    # A legacy forget10 log (300 items) passes the size check for forget10, but its questions are real TOFU's,
    # not the demo corpus's: the question check refuses it.
    with pytest.raises(ReferenceLogError, match="another split or dataset"):
        _load("tofu_forget10", data_dir=str(demo_data_dir), reference=str(legacy_logs / "phi_retain90"))


@pytest.fixture(scope="module")
def first_run(tiny_model_dir, demo_data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("eval_ref")
    res = run_lm_eval(tiny_model_dir, ["tofu_forget01"], out, {"data_dir": str(demo_data_dir)}, batch_size=8)
    return out, res


@pytest.mark.slow
def test_all_metrics_reported_and_nan_without_reference(first_run):
    _, res = first_run
    values = {k.split(",")[0]: v for k, v in res["results"]["tofu_forget01"].items() if "," in k and "stderr" not in k}
    assert METRICS == set(values)
    assert math.isnan(values["forget_quality"]) and math.isnan(values["privleak"])
    assert math.isnan(values["mia_reference_auc"])  # needs a reference too
    for name in METRICS - {"forget_quality", "privleak", "mia_reference_auc"}:
        assert not math.isnan(values[name]), name
    assert 0 <= values["forget_prob"] <= 1 and 0 <= values["mia_min_k_auc"] <= 1


@pytest.mark.slow
def test_results_file_carries_the_reference_record(first_run):
    out, _ = first_run
    (results_file,) = list(out.rglob("results_*.json"))
    entry = json.loads(results_file.read_text())["configs"]["tofu_forget01"]["unlearning_reference"]
    assert entry["forget_split"] == "forget01" and entry["n_forget"] == 6 == len(entry["forget_truth_ratio"])
    assert entry["answer_scoring"] == "all"


@pytest.mark.slow
def test_a_model_is_refused_as_its_own_reference(first_run, tiny_model_dir, demo_data_dir, tmp_path):
    """Issue 12, item 3: the model being evaluated (same weights, even as a copy) is never its own reference."""
    import shutil

    ref_dir, _ = first_run
    copy = shutil.copytree(tiny_model_dir, tmp_path / "copy")
    with pytest.raises(ReferenceLogError, match="produced by the model being evaluated"):
        run_lm_eval(copy, ["tofu_forget01_likelihood"], tmp_path / "out",
                    {"data_dir": str(demo_data_dir), "reference": str(ref_dir)}, batch_size=8)


@pytest.mark.slow
def test_identical_outputs_give_forget_quality_one_and_the_reference_file_is_recorded(
        first_run, tiny_model_dir, demo_data_dir, tmp_path):
    ref_dir, _ = first_run
    stand_in = reference_stand_in(ref_dir, "tofu_forget01", tmp_path / "ref", "retain-model")
    res = run_lm_eval(tiny_model_dir, ["tofu_forget01_likelihood"], tmp_path / "out",
                      {"data_dir": str(demo_data_dir), "reference": str(tmp_path / "ref")}, batch_size=8)
    values = res["results"]["tofu_forget01_likelihood"]
    assert values["forget_quality,none"] == pytest.approx(1.0)
    assert values["privleak,none"] == pytest.approx(0.0, abs=1e-9)
    assert values["mia_reference_auc,none"] == pytest.approx(0.5)  # loss - reference loss = 0 for every item
    record = res["configs"]["tofu_forget01_likelihood"]["unlearning_reference"]
    assert record["reference_file"] == str(stand_in)
    assert record["model"]["pretrained"] == str(tiny_model_dir.resolve()) and record["model"]["fingerprint"]


CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


@pytest.mark.slow
def test_chat_template_puts_the_question_in_the_user_turn(tiny_model_dir, demo_data_dir, tmp_path):
    import shutil

    from lm_eval import simple_evaluate
    from transformers import AutoTokenizer

    chat_dir = tmp_path / "chat_model"
    shutil.copytree(tiny_model_dir, chat_dir)
    tok = AutoTokenizer.from_pretrained(chat_dir)
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(chat_dir)
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata={"data_dir": str(demo_data_dir)})
    res = simple_evaluate(model="hf", model_args={"pretrained": str(chat_dir), "dtype": "float32"}, device="cpu",
                          tasks=["tofu_forget01"], task_manager=tm, limit=5, apply_chat_template=True,
                          bootstrap_iters=0, log_samples=True)
    sample = next(s for s in res["samples"]["tofu_forget01"] if s["doc"]["split"] == "forget")
    ctx, cont = sample["arguments"][1]
    assert ctx == f"<|user|>{sample['doc']['question']}\n<|assistant|>"
    assert cont == sample["doc"]["answer"]  # no leading space after the assistant tag
    assert not math.isnan(res["results"]["tofu_forget01"]["forget_prob,none"])
