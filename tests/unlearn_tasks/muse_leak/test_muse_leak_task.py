"""Leak@k on MUSE's forget sets (``muse_{news,books}_{knowmem,verbmem}_leak``): the release's settings, its
questions and passages, and the criterion on known samples."""

import pytest
from lm_eval.tasks import TaskManager

from fixtures.classifier import build_constant_classifier
from fixtures.muse import FORGET, corpus, qa
from harness_ext import tasks_dir
from unlearn_tasks.muse.prompts import knowmem_prompt
from unlearn_tasks.muse_leak.options import MuseLeakOptions

TASKS = {f"muse_{c}_{p}_leak" for c in ("news", "books") for p in ("knowmem", "verbmem")}


def _load(name, **metadata):
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    return tm.load([name])["tasks"][name]


def test_every_yaml_is_indexed():
    assert TASKS <= set(TaskManager(include_path=str(tasks_dir()), include_defaults=False).all_tasks)


def test_release_defaults_per_part():
    knowmem = MuseLeakOptions.from_metadata({"part": "knowmem"})
    verbmem = MuseLeakOptions.from_metadata({"part": "verbmem"})
    assert (knowmem.leak_max_new_tokens, verbmem.leak_max_new_tokens) == (32, 128)  # the release's MUSE configs
    assert (knowmem.leak_n, knowmem.leak_temperature, knowmem.leak_top_p) == (200, 1.0, 1.0)
    assert knowmem.leak_k == [1, 2, 4, 8, 16, 32, 64, 128]
    assert (knowmem.leak_criterion, knowmem.leak_threshold) == ("entailment", 0.1)
    assert MuseLeakOptions.from_metadata({"part": "verbmem", "leak_max_new_tokens": 7}).leak_max_new_tokens == 7
    with pytest.raises(ValueError, match="part must be one of knowmem, verbmem"):
        MuseLeakOptions.from_metadata({"part": "privleak"})


def test_knowmem_asks_the_forget_questions_after_the_few_shot_examples(muse_data_dir):
    task = _load("muse_news_knowmem_leak", data_dir=str(muse_data_dir), leak_n=4, leak_k=[1, 4],
                 leak_criterion="rougeL_recall")
    docs = task.test_docs()
    rows = corpus()["knowmem"]
    assert [d["reference"] for d in docs] == [r["answer"] for r in rows["forget_qa"]]  # the forget set only
    shots = [(r["question"], r["answer"]) for r in rows["forget_qa_icl"]]
    task.build_all_requests(limit=2, rank=0, world_size=1)
    assert [i.repeats for i in task.instances] == [4, 4]
    prompt, kwargs = task.instances[0].args
    assert prompt == knowmem_prompt(rows["forget_qa"][0]["question"], shots)
    assert prompt == f"Question: {qa(0)[0]}\nAnswer: {qa(0)[1]}\n\nQuestion: {qa(1)[0]}\nAnswer: "
    # no stop strings (the release samples 32 tokens and cuts nothing)
    assert kwargs == {"until": [], "do_sample": True, "temperature": 1.0, "top_p": 1.0, "max_gen_toks": 32}


def test_verbmem_continues_the_forget_prefixes_against_the_whole_continuation(muse_data_dir):
    task = _load("muse_books_verbmem_leak", data_dir=str(muse_data_dir), leak_n=3, leak_k=[1, 2, 3],
                 leak_criterion="rougeL_recall", leak_threshold=0.5)
    docs = task.test_docs()
    rows = corpus()["verbmem"]["forget"]
    assert len(docs) == len(FORGET) and [d["prompt"] for d in docs] == [r["prompt"] for r in rows]
    task.build_all_requests(limit=1, rank=0, world_size=1)
    assert task.instances[0].args[1]["max_gen_toks"] == 128
    gt = rows[0]["gt"].strip()
    words = gt.split()
    half = " ".join(words[: (len(words) + 1) // 2])  # recall (half the words, rounded up) / all >= 0.5
    record = task.score_document(docs[0], [[gt, half, "nothing of it"]])
    assert record["rougeL_recall"][0] == pytest.approx(1.0)
    assert record["rougeL_recall"][1] == pytest.approx(((len(words) + 1) // 2) / len(words))
    assert record["leaked"] == [True, True, False] and record["leaks"] == 2 and record["n"] == 3
    metrics = task.compute_metrics([record, {**record, "leaks": 0}])
    assert metrics["leak_at_1"] == pytest.approx((2 / 3 + 0) / 2)
    assert metrics["leak_at_2"] == pytest.approx((1 - 0 + 0) / 2)  # C(1, 2) = 0: every pair holds a leak
    assert not any(task.higher_is_better().values())


def test_entailment_criterion_on_known_samples(muse_data_dir, tmp_path):
    yes = build_constant_classifier(tmp_path / "yes", labels=("entailment", "neutral"), bias=(1.0, 0.0))
    task = _load("muse_news_knowmem_leak", data_dir=str(muse_data_dir), leak_n=3, leak_k=[1],
                 leak_nli_model=str(yes))
    doc = task.test_docs()[0]
    answer = doc["reference"]
    record = task.score_document(doc, [[answer, "zzz", f"It was {answer}."]])
    assert record["nli_label"] == ["entailment", None, "entailment"]  # below the 0.1 recall: not asked
    assert record["leaked"] == [True, False, True] and record["leaks"] == 2
