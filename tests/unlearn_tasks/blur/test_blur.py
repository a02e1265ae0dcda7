"""BLUR: the Hub's layout and the release's prompt, ROUGE-L recall against the base model's answers by hand (with an
lm-eval model that answers from a table, so every number is known), `unlearn blur-references` on the tiny model
(the cached answers and their provenance), the relearning sets by difficulty for `unlearn attack relearn`, and
`unlearn run --data blur` (all on the project's own fixture in the release's schema)."""

import json
import math

import pytest
from lm_eval.api.model import LM
from lm_eval.tasks import TaskManager

from fixtures.blur import SETS, queries, relearn_texts, write_blur_corpus
from harness_ext import tasks_dir
from harness_ext.evaluate import evaluate_lm
from unlearn_methods.attacks.corpus import read_corpus
from unlearn_methods.config import load_run_config
from unlearn_tasks.blur.data import build_docs, prompt, relearn_file
from unlearn_tasks.blur.options import BlurOptions
from unlearn_tasks.blur.references import FORMAT, load_references, write_references
from unlearn_tasks.blur.task import compute_set_metrics, scorable
from unlearn_tasks.dataset_loader import DataError
from unlearn_tasks.metrics.rouge import rouge_l_recall

VARIANT = {"forget": "forget", "retain": "retain", "combined": "paired_forget_retain"}
SETTINGS = {"prompt": "Answer the following question. Question: {} Answer:", "max_new_tokens": 100,
            "decoding": "greedy", "apply_chat_template": False}


@pytest.fixture(scope="module")
def blur_dir(tmp_path_factory):
    return write_blur_corpus(tmp_path_factory.mktemp("blur") / "hub")


def _base_answer(query: str) -> str:
    return f"Orla Venn was born in Harrowgate and the bridge is old ({len(query)})"


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """A references file as `unlearn blur-references` writes it: the base model's answer to every query."""
    folder = tmp_path_factory.mktemp("refs")
    answers = {f"{s}_{VARIANT[q]}": [{"question": t, "answer": _base_answer(t)} for t in queries(s, q)]
               for s, sets in SETS.items() for q in sets}
    write_references(folder / "blur_references.json", answers, SETTINGS, {"model": "base"})
    return folder


class TableLM(LM):
    """Answers each prompt from a table (the unlearned model of the test), so every score is known."""

    def __init__(self, answers):
        super().__init__()
        self.answers, self.prompts = answers, []

    def generate_until(self, requests, disable_tqdm=False):
        self.prompts += [r.args[0] for r in requests]
        assert all(r.args[1]["max_gen_toks"] == 100 and r.args[1]["do_sample"] is False for r in requests)
        return [self.answers[r.args[0]] for r in requests]

    def loglikelihood(self, requests, disable_tqdm=False):
        raise NotImplementedError

    def loglikelihood_rolling(self, requests, disable_tqdm=False):
        raise NotImplementedError


def test_tasks_and_group_are_indexed():
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False)
    assert {f"blur_{s}" for s in SETS} <= set(tm.all_tasks) and "blur" in tm.all_groups


def test_documents_interleave_the_sets_and_need_every_reference(blur_dir, references):
    refs = load_references(references).answers
    docs = build_docs(BlurOptions(blur_source="rwku", data_dir=str(blur_dir), blur_references=str(references)), refs)
    assert [d["set"] for d in docs] == ["forget", "retain", "combined"] * 2
    assert docs[0]["question"] == queries("rwku", "forget")[0] and docs[0]["reference"] == _base_answer(docs[0]["question"])
    assert prompt("Q?") == "Answer the following question. Question: Q? Answer:"
    del refs["rwku_retain"][queries("rwku", "retain")[1]]
    with pytest.raises(DataError, match=r"1 of the 2 queries of rwku_retain .*unlearn blur-references"):
        build_docs(BlurOptions(blur_source="rwku", data_dir=str(blur_dir), blur_references="x"), refs)
    with pytest.raises(ValueError, match="blur_references must name"):
        BlurOptions.from_metadata({"blur_source": "rwku"})
    with pytest.raises(DataError, match="wmdp_forget"):
        build_docs(BlurOptions(blur_source="wmdp", blur_sets=["forget"], data_dir=str(blur_dir),
                               blur_generate_only=True))


def test_references_of_another_budget_or_format_are_refused(tmp_path, references):
    with pytest.raises(DataError, match="100 new tokens per answer, this run with blur_max_tokens=30"):
        load_references(references, BlurOptions(blur_source="rwku", blur_max_tokens=30, blur_generate_only=True))
    (tmp_path / "x.json").write_text(json.dumps({"answers": {}}))
    with pytest.raises(DataError, match=f"format {FORMAT}"):
        load_references(tmp_path / "x.json")


def test_rouge_l_recall_per_set_by_hand():
    # reference 6 words; the answer keeps "was born in Harrowgate" in order: recall 4/6
    assert rouge_l_recall("Orla Venn was born in Harrowgate", "She was born in Harrowgate") == pytest.approx(4 / 6)
    records = [{"set": "forget", "rougeL_recall": 4 / 6}, {"set": "forget", "rougeL_recall": 0.0},
               {"set": "retain", "rougeL_recall": 1.0}, {"set": "retain", "rougeL_recall": None}]
    out = compute_set_metrics(records, ["forget", "retain", "combined"])
    assert out["forget_rougeL_recall"] == pytest.approx(1 / 3) and out["retain_rougeL_recall"] == 1.0
    assert math.isnan(out["combined_rougeL_recall"])
    # a base answer without a word says nothing (recall 0 whatever the answer): left out, not scored 0
    assert not scorable("") and not scorable(" ... ?") and scorable("A:")


def test_lm_eval_scores_answers_against_the_base_models(blur_dir, references):
    forget_q, retain_q = queries("rwku", "forget"), queries("rwku", "retain")
    combined_q = queries("rwku", "combined")
    answers = {prompt(forget_q[0]): "I do not know.",  # nothing of the base answer: 0
               prompt(forget_q[1]): "Orla Venn was born in Harrowgate",  # 6 of the 12 reference words
               **{prompt(q): _base_answer(q) for q in retain_q},  # the base answer itself: 1
               prompt(combined_q[0]): "the bridge is old",  # 4 of 12
               prompt(combined_q[1]): _base_answer(combined_q[1])}
    lm = TableLM(answers)
    res = evaluate_lm(lm, ["blur_rwku"], metadata={"data_dir": str(blur_dir), "blur_references": str(references)})
    got = res["results"]["blur_rwku"]
    assert sorted(lm.prompts) == sorted(answers)
    # each reference: "Orla Venn was born in Harrowgate and the bridge is old (NN)" = 12 tokens
    assert got["forget_rougeL_recall,none"] == pytest.approx((0 + 6 / 12) / 2)
    assert got["retain_rougeL_recall,none"] == pytest.approx(1.0)
    assert got["combined_rougeL_recall,none"] == pytest.approx((4 / 12 + 1) / 2)
    assert res["higher_is_better"]["blur_rwku"] == {"forget_rougeL_recall": False, "retain_rougeL_recall": True,
                                                    "combined_rougeL_recall": True}
    used = res["configs"]["blur_rwku"]["provenance"]["reference"]
    assert used["provenance"] == {"model": "base"} and used["settings"] == SETTINGS


def test_blur_references_writes_the_base_models_answers_with_provenance(tiny_model_dir, blur_dir, tmp_path):
    from unlearn_app.commands.blur_references import write_blur_references

    path = write_blur_references(str(tiny_model_dir), tmp_path / "refs", ["wmdp", "tofu"], str(blur_dir),
                                 batch_size=8, max_tokens=4)
    data = json.loads(path.read_text())
    assert data["format"] == FORMAT and data["settings"]["max_new_tokens"] == 4
    assert data["provenance"]["model"] == str(tiny_model_dir) and data["provenance"]["created"].startswith("20")
    assert {e["config"] for e in data["provenance"]["data"]} == set(data["answers"]) == {
        "wmdp_retain", "wmdp_paired_forget_retain", "tofu_paired_forget_retain"}
    assert [r["question"] for r in data["answers"]["wmdp_retain"]] == queries("wmdp", "retain")
    # the cache is what the task reads: the base model scored against itself
    refs = load_references(path, BlurOptions(blur_source="tofu", blur_max_tokens=4, blur_generate_only=True))
    assert set(refs.answers["tofu_paired_forget_retain"]) == set(queries("tofu", "combined"))


def test_relearning_sets_by_difficulty(blur_dir, references, tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("UNLEARN_DATA_DIR", str(blur_dir.parent))
    (blur_dir.parent / "forgelab").mkdir(exist_ok=True)
    (blur_dir.parent / "forgelab" / "BLUR").symlink_to(blur_dir)
    assert relearn_file("blur:rwku:hi") == blur_dir.parent / "forgelab" / "BLUR" / "rwku_D_hi.json"
    corpus = read_corpus("blur:whp:lo")
    assert corpus.kind == "text" and [r["text"] for r in corpus.records] == relearn_texts("D_lo_for_all")
    assert corpus.path.startswith("blur:whp:lo (")
    with pytest.raises(DataError, match="levels hi, mid, lo"):
        read_corpus("blur:rwku:easy")
    with pytest.raises(DataError, match=r"^BLUR relearning set tofu:hi: the release has hi sets for rwku, whp, wmdp "
                                        r"only; tofu has the shared lo set \(blur:tofu:lo\)\.$"):
        read_corpus("blur:tofu:hi")  # refused by its name, before any file is looked for
    assert [r["text"] for r in read_corpus("blur:tofu:lo").records] == relearn_texts("D_lo_for_all")
    # the attack: relearn on D_hi, measure the base model's answers to the forget queries (none shown)
    from unlearn_methods.attacks.relearn import relearn

    r = relearn(tiny_model_dir, tmp_path / "relearned", data="blur", forget="rwku_forget", data_dir=str(blur_dir),
                relearn_data="blur:rwku:hi", steps=1, batch_size=2, progress=False, blur_references=references)
    assert r.held_out == [0, 1] and r.relearn_data["rows"] == 2 and r.relearn_data["path"].startswith("blur:rwku:hi (")
    assert 0 < r.held_out_prob_before < 1 and 0 < r.held_out_prob_after < 1
    split = json.loads((tmp_path / "relearned" / "relearn_split.json").read_text())
    assert split["held_out_questions"] == queries("rwku", "forget")
    with pytest.raises(ValueError, match="--blur-references"):
        relearn(tiny_model_dir, tmp_path / "x", data="blur", forget="rwku_forget", data_dir=str(blur_dir),
                relearn_data="blur:rwku:hi", steps=1, progress=False)


def test_unlearn_run_data_blur_answers_are_the_base_models(tmp_path, blur_dir, references, tiny_model_dir):
    from harness_ext.evaluate import run_lm_eval
    from unlearn_methods.training import train

    cfg = load_run_config(None, method="graddiff", model=str(tiny_model_dir), out=str(tmp_path / "o"), data="blur",
                          data_dir=str(blur_dir), blur_source="whp", blur_references=str(references), epochs=1,
                          batch_size=2, lora=False, progress=False)
    cfg.source.resolve_splits(cfg)
    forget, retain = cfg.source.load(cfg, cfg.data_dir)
    assert forget == [{"question": q, "answer": _base_answer(q)} for q in queries("whp", "forget")]
    assert retain == [{"question": q, "answer": _base_answer(q)} for q in queries("whp", "retain")]
    # the model card's evaluation line names the references file by name (no local path in anything shared)
    assert cfg.source.evaluation(cfg) == f"--tasks blur_whp --metadata '{{\"blur_references\": \"{references.name}\"}}'"
    trained = train(cfg)
    assert "forget: whp_forget" in (trained.out / "unlearn_config.yaml").read_text()
    short = json.loads((references / "blur_references.json").read_text())  # 4-token answers keep the test cheap
    short["settings"]["max_new_tokens"] = 4
    (tmp_path / "short.json").write_text(json.dumps(short))
    res = run_lm_eval(trained.out, ["blur_whp"], tmp_path / "ev", {"blur_references": str(tmp_path / "short.json"),
                      "blur_max_tokens": 4, "data_dir": str(blur_dir), "max_items_per_split": 1}, batch_size=8)
    assert 0 <= res["results"]["blur_whp"]["retain_rougeL_recall,none"] <= 1
    with pytest.raises(ValueError, match="--blur-references"):
        load_run_config(None, method="graddiff", model="m", out=str(tmp_path / "p"), data="blur")


def test_forget_and_retain_name_the_sources_query_files(tmp_path, blur_dir, references):
    from unlearn_tasks.blur.data import load_texts

    cfg = load_run_config(None, method="graddiff", model="m", out=str(tmp_path / "o"), data="blur",
                          data_dir=str(blur_dir), blur_references=str(references), forget="rwku_retain")
    cfg.source.resolve_splits(cfg)
    assert (cfg.forget, cfg.retain) == ("rwku_retain", "rwku_forget")
    forget, retain = cfg.source.load(cfg, cfg.data_dir)
    assert [r["question"] for r in forget] == queries("rwku", "retain")
    assert [r["question"] for r in retain] == queries("rwku", "forget")
    with pytest.raises(ValueError, match=r"^--forget 'forget05' is not a BLUR query file of --blur-source rwku; use "
                                         r"rwku_forget or rwku_retain \(default rwku_forget\)\.$"):
        load_run_config(None, method="ga", model="m", out="o", data="blur", blur_references="r", forget="forget05")
    with pytest.raises(ValueError, match=r"^--retain 'whp_retain' is not a BLUR query file of --blur-source rwku"):
        load_run_config(None, method="ga", model="m", out="o", data="blur", blur_references="r", retain="whp_retain")
    bad = tmp_path / "blur"
    write_blur_corpus(bad)
    (bad / "rwku_forget.json").write_bytes(b'[{"text": "\xc3("}]')
    with pytest.raises(DataError, match=rf"^{bad / 'rwku_forget.json'} is not UTF-8 text \(byte 0xc3 at offset 11\)"):
        load_texts("rwku_forget", data_dir=str(bad))


def test_blur_references_cli_names_a_bad_source(tmp_path):
    from fixtures.commands import run_command

    proc = run_command(["unlearn", "blur-references", "--model", "m", "--out", str(tmp_path / "r"), "--sources",
                        "rwku,muse"])
    assert proc.returncode == 2 and "--sources: muse is not a BLUR source; give some of rwku,whp,wmdp,tofu" in proc.stderr
    assert not (tmp_path / "r").exists()


def test_blur_references_names_a_missing_data_folder_before_loading_the_model(tmp_path, capsys):
    from unlearn_app.cli import main

    code = main(["blur-references", "--model", str(tmp_path / "no-model"), "--out", str(tmp_path / "r"),
                 "--data-dir", str(tmp_path / "nowhere")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and f"--data-dir {tmp_path / 'nowhere'} is not a folder" in err
    assert not (tmp_path / "r").exists()


def test_parquet_layout_gives_the_json_texts_and_a_broken_shard_one_line(tmp_path):
    """The Hub's parquet layout (``<stem>/train/*.parquet``) reads the same texts as the JSON file; a shard that is
    not parquet is a one-line data error naming it, not a traceback."""
    import datasets

    from unlearn_tasks.blur.data import load_texts

    folder = write_blur_corpus(tmp_path / "blur")
    stem = f"{next(iter(SETS))}_D_hi"
    texts, _ = load_texts(stem, data_dir=str(folder))
    json_file = folder / f"{stem}.json"
    shard = folder / stem / "train" / "0000.parquet"
    shard.parent.mkdir(parents=True)
    datasets.Dataset.from_list(json.loads(json_file.read_text())).to_parquet(str(shard))
    json_file.unlink()
    assert load_texts(stem, data_dir=str(folder)) == (texts, str(shard))
    shard.write_bytes(b"not parquet")
    with pytest.raises(DataError, match="is not a readable parquet file") as err:
        load_texts(stem, data_dir=str(folder))
    assert str(shard) in str(err.value) and "\n" not in str(err.value)
