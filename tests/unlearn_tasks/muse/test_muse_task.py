"""The MUSE tasks inside lm-eval: discovery, data in both layouts, requests, scoring, runs on the tiny model (slow)."""

import json
import math

import pytest
from lm_eval.tasks import TaskManager

from fixtures.runs import reference_stand_in
from harness_ext import tasks_dir
from harness_ext.evaluate import run_lm_eval
from unlearn_tasks.dataset_loader import DataError
from unlearn_tasks.metrics.rouge import rouge_l_f1
from unlearn_tasks.muse.documents import build_docs
from unlearn_tasks.muse.options import MuseOptions
from unlearn_tasks.reference_logs import ReferenceLogError

TASKS = {f"muse_{c}{p}" for c in ("news", "books") for p in ("", "_verbmem", "_knowmem", "_privleak")}
METRICS = {"forget_verbmem", "forget_knowmem", "retain_knowmem", "mia_loss_auc", "mia_zlib_auc", "mia_min_k_auc",
           "mia_min_k_plus_plus_auc", "privleak", "extraction_strength", "exact_memorization"}


def test_every_yaml_is_indexed():
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False)
    assert TASKS <= set(tm.all_tasks) and "muse" in tm.all_groups


def _load(name, **metadata):
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    return tm.load([name])["tasks"][name]


def test_hub_parquet_and_release_json_layouts_give_the_same_documents(muse_data_dir, tmp_path):
    from fixtures.muse import write_muse_corpus

    json_dir = write_muse_corpus(tmp_path / "json", layout="json")
    parquet = build_docs(MuseOptions(data_dir=str(muse_data_dir)))
    assert parquet == build_docs(MuseOptions(data_dir=str(json_dir)))
    assert [d["set"] for d in parquet[:5]] == ["verbmem_forget", "knowmem_forget", "knowmem_retain", "privleak_forget",
                                              "privleak_holdout"]
    counts = {s: sum(d["set"] == s for d in parquet) for s in {d["set"] for d in parquet}}
    assert counts == {"verbmem_forget": 4, "knowmem_forget": 3, "knowmem_retain": 3, "privleak_forget": 4,
                      "privleak_holdout": 6}
    capped = build_docs(MuseOptions(data_dir=str(muse_data_dir), parts=["privleak"], max_items_per_split=2))
    assert len(capped) == 4


def test_old_hub_split_names_and_missing_files(tmp_path):
    from fixtures.muse import write_muse_corpus

    folder = write_muse_corpus(tmp_path / "d", layout="json")
    for name in ("retain_qa", "retain_qa_icl"):
        (folder / "knowmem" / f"{name}.json").rename(folder / "knowmem" / f"{name.replace('retain', 'retain2')}.json")
    assert sum(d["set"] == "knowmem_retain" for d in build_docs(MuseOptions(data_dir=str(folder), parts=["knowmem"]))) == 3
    (folder / "verbmem" / "forget.json").unlink()
    with pytest.raises(DataError, match=r"verbmem.*forget"):
        build_docs(MuseOptions(data_dir=str(folder), parts=["verbmem"]))


def test_data_dir_per_corpus_and_muse_data_dir_wins():
    opts = MuseOptions(corpus="books", data_dir={"news": "N", "books": "B"})
    assert opts.local_dir == "B" and opts.repo_id == "muse-bench/MUSE-Books"
    assert MuseOptions(data_dir="tofu_dir", muse_data_dir="muse_dir").local_dir == "muse_dir"
    with pytest.raises(ValueError, match="parts must be"):
        MuseOptions.from_metadata({"parts": ["verbatim"]})


def test_requests_per_document(muse_data_dir):
    task = _load("muse_news", data_dir=str(muse_data_dir))
    task.build_all_requests(rank=0, world_size=1)
    by_set = {}
    for inst in task.instances:
        by_set.setdefault(inst.doc["set"], []).append(inst)
    verbmem = by_set["verbmem_forget"][0]
    assert verbmem.request_type == "generate_until"
    assert verbmem.args[0] == "The town of Arlow opened a new library in January."
    assert verbmem.args[1] == {"until": [], "max_gen_toks": 128, "do_sample": False, "temperature": 0.0}
    forced = by_set["verbmem_forget"][1]  # open-unlearning's ES / EM input: the true continuation, teacher-forced
    assert forced.request_type == "unlearn_answer_logprobs" and forced.args[0] == verbmem.args[0]
    assert forced.args[1] == " " + forced.doc["reference"] and forced.args[2] == {"append_eos": False}
    knowmem = by_set["knowmem_retain"][0]
    assert knowmem.args[0] == ("Question: Who is the mayor of Elsworth?\nAnswer: Edda Moss\n\n"
                               "Question: Who is the mayor of Fenwick?\nAnswer: ")
    assert knowmem.args[1]["until"] == ["\n\n", "\nQuestion", "Question:"] and knowmem.args[1]["max_gen_toks"] == 32
    passage = by_set["privleak_holdout"][0]
    assert passage.request_type == "unlearn_answer_logprobs" and passage.args[0] == ""
    assert passage.args[2] == {"append_eos": False}
    assert passage.args[1].startswith("The town of Kettering Vale")


def test_scoring_a_document_by_hand(muse_data_dir, muse_tiny_model_dir):
    from transformers import AutoTokenizer

    task = _load("muse_news", data_dir=str(muse_data_dir), pretrained=str(muse_tiny_model_dir), verbmem_max_tokens=5)
    docs = list(task.test_docs())
    knowmem = next(d for d in docs if d["set"] == "knowmem_forget")
    record = task.process_results(knowmem, ["Bram Stoke is\n\nQuestion: who"])["forget_knowmem"]
    assert record["rougeL_f1"] == pytest.approx(rouge_l_f1("Bram Stoke", "Bram Stoke is")) == pytest.approx(0.8)
    verbmem = next(d for d in docs if d["set"] == "verbmem_forget")
    tok = AutoTokenizer.from_pretrained(muse_tiny_model_dir)
    reference = tok.decode(tok(verbmem["reference"])["input_ids"][:5], skip_special_tokens=True)
    assert task.reference_text(verbmem) == reference != verbmem["reference"]
    record = task.process_results(verbmem, [reference + " and more"])["forget_verbmem"]
    assert record["rougeL_f1"] == pytest.approx(rouge_l_f1(reference, reference + " and more"))


@pytest.fixture(scope="module")
def first_run(muse_tiny_model_dir, muse_data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("muse_eval")
    res = run_lm_eval(muse_tiny_model_dir, ["muse_news"], out, {"data_dir": str(muse_data_dir)}, batch_size=8)
    return out, res


@pytest.mark.slow
def test_all_metrics_and_nan_privleak_without_reference(first_run):
    _, res = first_run
    values = {k.split(",")[0]: v for k, v in res["results"]["muse_news"].items() if "," in k and "stderr" not in k}
    assert set(values) == METRICS
    assert math.isnan(values["privleak"])
    assert all(0 <= values[m] <= 1 for m in METRICS - {"privleak"})


@pytest.mark.slow
def test_results_file_carries_the_reference_record(first_run):
    out, res = first_run
    (results_file,) = list(out.rglob("results_*.json"))
    record = json.loads(results_file.read_text())["configs"]["muse_news"]["unlearning_reference"]
    assert record["corpus"] == "news" and record["n_forget"] == 4 and record["n_holdout"] == 6
    assert record["mia_auc"]["mia_min_k_auc"] == pytest.approx(res["results"]["muse_news"]["mia_min_k_auc,none"])


@pytest.mark.slow
def test_a_model_against_its_own_run_has_privleak_zero(first_run, muse_tiny_model_dir, muse_data_dir, tmp_path):
    ref_dir, _ = first_run
    with pytest.raises(ReferenceLogError, match="produced by the model being evaluated"):  # its own run is refused
        run_lm_eval(muse_tiny_model_dir, ["muse_news_privleak"], tmp_path / "own",
                    {"data_dir": str(muse_data_dir), "reference": {"news": str(ref_dir)}}, batch_size=8)
    stand_in = reference_stand_in(ref_dir, "muse_news", tmp_path / "ref", "retrained-model")
    res = run_lm_eval(muse_tiny_model_dir, ["muse_news_privleak"], tmp_path,
                      {"data_dir": str(muse_data_dir), "reference": {"news": str(tmp_path / "ref")}}, batch_size=8)
    record = res["configs"]["muse_news_privleak"]["unlearning_reference"]
    assert record["reference_file"] == str(stand_in)
    assert record["model"]["pretrained"] == str(muse_tiny_model_dir.resolve())
    assert res["results"]["muse_news_privleak"]["privleak,none"] == pytest.approx(0.0, abs=1e-9)
    res = run_lm_eval(muse_tiny_model_dir, ["muse_news_privleak"], tmp_path / "published",
                      {"data_dir": str(muse_data_dir), "reference": "published"}, batch_size=8)
    auc = res["results"]["muse_news_privleak"]["mia_min_k_auc,none"]
    expected = ((1 - auc) - 0.4772) / 0.4772 * 100
    assert res["results"]["muse_news_privleak"]["privleak,none"] == pytest.approx(expected)


def test_unlearn_data_dir_environment_holds_one_folder_per_hub_id(muse_data_dir, tmp_path, monkeypatch):
    import shutil

    shutil.copytree(muse_data_dir, tmp_path / "muse-bench" / "MUSE-Books")
    monkeypatch.setenv("UNLEARN_DATA_DIR", str(tmp_path))
    docs = build_docs(MuseOptions(corpus="books", parts=["verbmem"]))
    assert len(docs) == 4 and docs[0]["prompt"].startswith("The town of Arlow")


def test_chat_turns_only_for_knowmem(muse_data_dir):
    task = _load("muse_news", data_dir=str(muse_data_dir))
    docs = list(task.test_docs())
    knowmem = next(d for d in docs if d["set"] == "knowmem_forget")
    assert task.chat_messages(knowmem) == [
        {"role": "user", "content": "Who is the mayor of Arlow?"}, {"role": "assistant", "content": "Ada Quill"},
        {"role": "user", "content": "Who is the mayor of Brenmoor?"},
    ]
    assert all(task.chat_messages(d) is None for d in docs if d["set"] in ("verbmem_forget", "privleak_forget"))


def test_passage_scores_are_computed_on_the_tokens_muse_scores(muse_data_dir, muse_tiny_model_dir):
    """Through lm-eval's hf backend: the log-probs of every token after BOS (none for EOS), the same numbers as a
    direct forward pass; LOSS equals the model's own language-model loss (MUSE's "PPL" statistic)."""
    import torch
    from lm_eval.models.huggingface import HFLM

    from unlearn_tasks.muse.scoring import passage_scores

    task = _load("muse_news_privleak", data_dir=str(muse_data_dir))
    task.build_all_requests(rank=0, world_size=1, limit=2)
    lm = HFLM(pretrained=str(muse_tiny_model_dir), device="cpu", batch_size=2, dtype="float32")
    responses = lm.unlearn_answer_logprobs(task.instances)
    for inst, response in zip(task.instances, responses, strict=True):
        ids = torch.tensor([[lm.tokenizer.bos_token_id, *lm.tokenizer.encode(inst.doc["text"], add_special_tokens=False)]])
        with torch.no_grad():
            out = lm.model(ids, labels=ids)
        expected = torch.log_softmax(out.logits[0, :-1].float(), -1).gather(-1, ids[0, 1:, None]).squeeze(-1)
        assert response["logprobs"] == pytest.approx(expected.tolist(), abs=1e-5)
        assert passage_scores(response, inst.doc["text"], 0.4)["mia_loss"] == pytest.approx(float(out.loss), abs=1e-5)


def test_hub_parquet_wins_over_an_older_json_beside_it(muse_data_dir, tmp_path):
    import shutil

    folder = shutil.copytree(muse_data_dir, tmp_path / "hub")
    (folder / "verbmem" / "forget.json").write_text(json.dumps([{"text": "an older schema"}]))
    docs = build_docs(MuseOptions(data_dir=str(folder), parts=["verbmem"]))
    assert docs[0]["prompt"] == "The town of Arlow opened a new library in January."


def test_an_empty_parquet_shard_names_the_file(muse_data_dir, tmp_path):
    """Issue 29: a 0-row parquet gave datasets' DatasetGenerationError traceback; now one line naming the file."""
    import shutil

    import pyarrow.parquet as pq

    folder = shutil.copytree(muse_data_dir, tmp_path / "hub")
    shard = folder / "verbmem" / "forget-00000-of-00001.parquet"
    pq.write_table(pq.read_table(shard).slice(0, 0), shard)
    with pytest.raises(DataError, match=rf"^{shard} holds no records \(0 rows\)\.$"):
        build_docs(MuseOptions(data_dir=str(folder), parts=["verbmem"]))
