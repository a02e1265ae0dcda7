"""Issue 47, item 1: Leak@k as lm-eval tasks on TOFU's forget questions (``tofu_forget{01,05,10}_leak``)."""

import json
import math

import pytest
from lm_eval.tasks import TaskManager

from fixtures.classifier import build_constant_classifier
from harness_ext import tasks_dir
from harness_ext.evaluate import run_lm_eval
from harness_ext.vllm_samples import SAMPLES_ATTRIBUTE
from unlearn_tasks.classifier import ClassifierError
from unlearn_tasks.leak_task import sampling_problem
from unlearn_tasks.metrics.leak import leak_at_k
from unlearn_tasks.metrics.rouge import rouge_l_recall
from unlearn_tasks.tofu_leak.options import TofuLeakOptions

TASKS = {"tofu_forget01_leak", "tofu_forget05_leak", "tofu_forget10_leak"}


def _load(name, **metadata):
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    return tm.load([name])["tasks"][name]


def test_every_yaml_is_indexed():
    assert TASKS <= set(TaskManager(include_path=str(tasks_dir()), include_defaults=False).all_tasks)


def test_release_defaults():
    o = TofuLeakOptions.from_metadata({})
    assert (o.leak_n, o.leak_temperature, o.leak_top_p, o.leak_max_new_tokens) == (200, 1.0, 1.0, 200)
    assert o.leak_k == [1, 2, 4, 8, 16, 32, 64, 128]
    assert (o.leak_criterion, o.leak_threshold, o.leak_question) == ("entailment", 0.1, "paraphrased_question")
    assert o.leak_nli_model == "sileod/deberta-v3-base-tasksource-nli"


@pytest.mark.parametrize("metadata, message", [
    ({"leak_n": 4}, r"every leak_k must be between 1 and leak_n \(4\)"),
    ({"leak_k": []}, "leak_k must be a non-empty list"),
    ({"leak_top_p": 1.5}, "leak_top_p must be"),
    ({"leak_criterion": "exact"}, "leak_criterion must be one of entailment, rougeL_recall"),
    ({"leak_n": 0}, "leak_n must be"),
    # issue 56: non-finite values (JSON's 1e400 is inf), a k twice, the stated bounds
    ({"leak_temperature": math.inf}, r"leak_temperature must be a finite number, got inf"),
    ({"leak_top_p": math.nan}, r"leak_top_p must be a finite number, got nan"),
    ({"leak_threshold": -math.inf}, r"leak_threshold must be a finite number, got -inf"),
    ({"leak_k": [1, 2, 2, 4]}, r"leak_k gives 2 twice \(one leak_at_k each\); give each k once"),
    ({"leak_n": 10_000, "leak_k": [1, 10_000]}, None),  # the bound itself is taken
    ({"leak_n": 10_001}, r"leak_n must be a whole number >= 1, <= 10000, got 10001"),
    ({"leak_max_new_tokens": 4_096}, None),
    ({"leak_max_new_tokens": 4_097}, r"leak_max_new_tokens must be a whole number >= 1, <= 4096, got 4097"),
])
def test_bad_options_are_refused_in_one_line(metadata, message):
    if message is None:
        TofuLeakOptions.from_metadata(metadata)
        return
    with pytest.raises(ValueError, match=message) as e:
        TofuLeakOptions.from_metadata(metadata)
    assert "\n" not in str(e.value)


def test_the_task_asks_each_forget_question_n_times_with_sampling(demo_data_dir):
    task = _load("tofu_forget01_leak", data_dir=str(demo_data_dir), leak_n=5, leak_k=[1, 5], leak_temperature=0.7,
                 leak_top_p=0.9, leak_max_new_tokens=32, leak_criterion="rougeL_recall")
    docs = task.test_docs()
    forget = [json.loads(line) for line in (demo_data_dir / "forget01_perturbed.json").read_text().splitlines()]
    assert [d["question"] for d in docs] == [r["paraphrased_question"] for r in forget]  # the release's questions
    assert [d["answer"] for d in docs] == [r["answer"] for r in forget]
    task.build_all_requests(limit=2, rank=0, world_size=1)
    assert [i.repeats for i in task.instances] == [5, 5]
    assert all(getattr(i, SAMPLES_ATTRIBUTE) for i in task.instances)  # vllm: the 5 samples in one request
    prompt, kwargs = task.instances[0].args
    assert prompt == f"Question: {docs[0]['question']}\nAnswer:"  # the TOFU generation tasks' plain prompt
    assert kwargs == {"until": [], "do_sample": True, "temperature": 0.7, "top_p": 0.9, "max_gen_toks": 32}
    assert set(task.aggregation()) == {"leak_at_1", "leak_at_5"}
    assert not any(task.higher_is_better().values())
    modes = task.metric_modes()
    assert modes["sampling"] == {"do_sample": True, "temperature": 0.7, "top_p": 0.9, "max_gen_toks": 32}
    assert modes["leak_k"] == [1, 5] and "leak_nli_model" not in modes
    task.set_config(key="generation_kwargs", value={"temperature": 0.5}, update=True)  # what --gen_kwargs does
    assert task.metric_modes()["sampling"]["temperature"] == 0.5
    task.set_config(key="generation_kwargs", value={"do_sample": False}, update=True)  # --gen_kwargs do_sample=False
    with pytest.raises(ValueError, match=r"^tofu_forget01_leak: do_sample=False decodes greedily; Leak@k needs "
                                         r"leak_n independent samples"):
        task.build_all_requests(limit=1, rank=0, world_size=1)
    original = _load("tofu_forget01_leak", data_dir=str(demo_data_dir), leak_question="question",
                     leak_criterion="rougeL_recall")
    assert [d["question"] for d in original.test_docs()] == [r["question"] for r in forget]


@pytest.mark.parametrize("change, problem", [
    ({}, None),
    ({"temperature": 0.5, "top_p": 0.9}, None),
    ({"do_sample": False}, "do_sample=False decodes greedily"),
    ({"temperature": 0}, "temperature=0 is not a finite temperature > 0 (0 decodes greedily)"),
    ({"temperature": math.inf}, "temperature=inf is not a finite temperature > 0 (0 decodes greedily)"),
    ({"top_p": 0.0}, "top_p=0.0 is not a finite top_p in (0, 1]"),
    ({"top_p": 1.5}, "top_p=1.5 is not a finite top_p in (0, 1]"),
    ({"max_gen_toks": 4097}, "max_gen_toks=4097 is not a whole number from 1 to 4096"),
])
def test_gen_kwargs_that_stop_the_sampling_are_named(change, problem):
    sent = {"until": [], "do_sample": True, "temperature": 1.0, "top_p": 1.0, "max_gen_toks": 200}
    assert sampling_problem({**sent, **change}) == problem


def test_rouge_criterion_counts_samples_at_the_threshold(demo_data_dir):
    task = _load("tofu_forget01_leak", data_dir=str(demo_data_dir), leak_n=3, leak_k=[1, 2, 3],
                 leak_criterion="rougeL_recall", leak_threshold=0.5)
    doc = {"index": 0, "answer": "Alice wrote ten novels"}
    samples = [" Alice wrote ten novels ", "Alice wrote", "nothing here"]  # recall 1, 1/2, 0
    record = task.score_document(doc, [samples])
    assert record["rougeL_recall"] == pytest.approx([1.0, 0.5, 0.0])
    assert record["leaked"] == [True, True, False] and record["leaks"] == 2
    other = {"index": 1, "n": 3, "leaks": 0}
    metrics = task.compute_metrics([record, other])
    assert metrics["leak_at_1"] == pytest.approx((2 / 3 + 0) / 2)
    assert metrics["leak_at_2"] == pytest.approx((1 - 0 / 3 + 0) / 2)  # C(1,2) = 0: every pair leaks
    with pytest.raises(ValueError, match="fewer than leak_n=3 samples"):
        task.compute_metrics([{**record, "n": 2}])


@pytest.fixture(scope="module")
def nli_models(tmp_path_factory):
    """Two stand-in NLI models: one that always says entailment, one that never does (:mod:`fixtures.classifier`)."""
    root = tmp_path_factory.mktemp("nli")
    yes = build_constant_classifier(root / "yes", labels=("entailment", "neutral"), bias=(1.0, 0.0))
    no = build_constant_classifier(root / "no", labels=("entailment", "neutral"), bias=(0.0, 1.0))
    return yes, no


def test_entailment_criterion_asks_the_nli_model_above_the_threshold(demo_data_dir, nli_models):
    yes, no = nli_models
    doc = {"index": 0, "answer": "the cat sat"}
    samples = ["the cat sat", "zxq", "the cat"]  # recall 1, 0, 2/3: the second stays below the release's 0.1
    task = _load("tofu_forget01_leak", data_dir=str(demo_data_dir), leak_n=3, leak_k=[1], leak_nli_model=str(yes))
    record = task.score_document(doc, [samples])
    assert record["nli_label"] == ["entailment", None, "entailment"]
    assert record["leaked"] == [True, False, True] and record["leaks"] == 2
    task = _load("tofu_forget01_leak", data_dir=str(demo_data_dir), leak_n=3, leak_k=[1], leak_nli_model=str(no))
    record = task.score_document(doc, [samples])
    assert record["nli_label"] == ["neutral", None, "neutral"] and record["leaks"] == 0


def test_an_unloadable_nli_model_fails_before_any_sampling(demo_data_dir, tmp_path):
    with pytest.raises(ClassifierError, match="Cannot load the text classifier"):
        _load("tofu_forget01_leak", data_dir=str(demo_data_dir), leak_nli_model=str(tmp_path))


def test_chat_and_tofu_prompts(demo_data_dir):
    """With --apply_chat_template the question is the user turn; ``generation_prompt: tofu`` adds TOFU's space."""
    task = _load("tofu_forget01_leak", data_dir=str(demo_data_dir), leak_criterion="rougeL_recall")
    doc = task.test_docs()[0]
    rendered = task.fewshot_context(doc, 0, apply_chat_template=True,
                                    chat_template=lambda turns, add_generation_prompt: json.dumps(turns))
    assert json.loads(rendered) == [{"role": "user", "content": doc["question"]}]
    tofu = _load("tofu_forget01_leak", data_dir=str(demo_data_dir), leak_criterion="rougeL_recall",
                 generation_prompt="tofu")
    tofu.build_all_requests(limit=1, rank=0, world_size=1)
    assert tofu.instances[0].args[0] == f"Question: {doc['question']}\nAnswer: "


@pytest.fixture(scope="module")
def leak_runs(tiny_model_dir, demo_data_dir, tmp_path_factory):
    """Two runs of the (untrained) tiny model with the same seeds: n = 6 samples per question, ROUGE criterion at a
    threshold its word salad reaches now and then (a shared word of the answer)."""
    metadata = {"data_dir": str(demo_data_dir), "leak_n": 6, "leak_k": [1, 2, 6], "leak_criterion": "rougeL_recall",
                "leak_threshold": 0.1, "leak_max_new_tokens": 16}
    return [run_lm_eval(tiny_model_dir, ["tofu_forget01_leak"], tmp_path_factory.mktemp(f"leak{i}"), metadata,
                        batch_size=6, log_samples=True) for i in range(2)]


@pytest.mark.slow
def test_leak_at_k_from_the_samples_equals_the_estimator(leak_runs):
    res = leak_runs[0]
    values = res["results"]["tofu_forget01_leak"]
    samples = res["samples"]["tofu_forget01_leak"]
    assert len(samples) == 6
    counts = []
    for s in samples:
        answers = s["resps"][0]
        assert len(answers) == 6 and len(set(answers)) > 1  # six samples per question, drawn with sampling
        record = s["leak_at_1"]
        recalls = [rouge_l_recall(s["doc"]["answer"], a.strip()) for a in answers]
        assert record["rougeL_recall"] == pytest.approx(recalls)
        counts.append(sum(r >= 0.1 for r in recalls))
        assert record["leaks"] == counts[-1]
    assert 0 < sum(counts) and min(counts) < 6  # some samples leak, not all: the estimator is exercised
    for k in (1, 2, 6):
        by_hand = sum(leak_at_k(6, c, k) for c in counts) / len(counts)
        assert values[f"leak_at_{k},none"] == pytest.approx(by_hand)
    # Leak@1 is the share of leaking samples; Leak@n the share of questions with any leaking sample
    assert values["leak_at_1,none"] == pytest.approx(sum(counts) / 36)
    assert values["leak_at_6,none"] == pytest.approx(sum(c > 0 for c in counts) / 6)
    assert values["leak_at_1,none"] <= values["leak_at_2,none"] <= values["leak_at_6,none"]


@pytest.mark.slow
def test_the_same_seed_gives_the_same_samples_and_numbers(leak_runs):
    first, second = leak_runs
    assert [s["resps"] for s in first["samples"]["tofu_forget01_leak"]] == \
        [s["resps"] for s in second["samples"]["tofu_forget01_leak"]]
    a, b = first["results"]["tofu_forget01_leak"], second["results"]["tofu_forget01_leak"]
    assert {k: v for k, v in a.items() if "leak_at" in k} == {k: v for k, v in b.items() if "leak_at" in k}
    assert not math.isnan(a["leak_at_1,none"])
