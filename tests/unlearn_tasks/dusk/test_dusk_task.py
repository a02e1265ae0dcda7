"""The DUSK tasks inside lm-eval: discovery, data in the Hub's layouts, the membership-inference windows, the
reference, and `unlearn run --data dusk` then `--tasks dusk` on the tiny model with every metric recomputed from the
logged samples."""

import ast
import math

import pytest
from lm_eval.tasks import TaskManager

from fixtures.dusk import PROFS, write_dusk_corpus
from harness_ext import tasks_dir
from unlearn_tasks.dataset_loader import DataError
from unlearn_tasks.dusk import scoring
from unlearn_tasks.dusk.data import DOCUMENT_SEPARATOR, build_docs, privacy_texts, raw_text, windows
from unlearn_tasks.dusk.options import DuskOptions
from unlearn_tasks.dusk.reference import load_reference
from unlearn_tasks.muse.prompts import truncate_reference
from unlearn_tasks.reference_logs import ReferenceLogError

TASKS = {"dusk_verbatim", "dusk_forget_qa", "dusk_shared_qa", "dusk_retain_qa", "dusk_privacy"}


@pytest.fixture(scope="module")
def dusk_dir(tmp_path_factory):
    return write_dusk_corpus(tmp_path_factory.mktemp("dusk") / "hub")


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


def test_every_yaml_is_indexed():
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False)
    assert TASKS <= set(tm.all_tasks) and "dusk" in tm.all_groups


def test_hub_parquet_and_first_json_layouts_give_the_same_documents(dusk_dir, tmp_path):
    json_dir = write_dusk_corpus(tmp_path / "json", layout="json")
    for measure in ("verbatim", "forget_qa", "shared_qa", "retain_qa", "privacy"):
        docs = build_docs(DuskOptions(dusk_set=measure, data_dir=str(dusk_dir)))
        assert docs == build_docs(DuskOptions(dusk_set=measure, data_dir=str(json_dir))), measure
    qa = build_docs(DuskOptions(dusk_set="forget_qa", data_dir=str(dusk_dir)))
    icl = f"Question: Where was Dr. {PROFS[0][0]} born?\nAnswer: {PROFS[0][4]}\n\n"
    assert qa[0]["prompt"] == f"{icl}Question: Which tea does Dr. {PROFS[1][0]} drink?\nAnswer: "
    assert [d["reference"] for d in qa] == [p[5] for p in PROFS[1:]]
    # without a tokenizer, one passage per document, interleaved forget / retain / holdout
    privacy = build_docs(DuskOptions(dusk_set="privacy", data_dir=str(dusk_dir)))
    assert [d["set"] for d in privacy[:4]] == ["privacy_forget", "privacy_retain", "privacy_holdout", "privacy_forget"]
    assert {s: sum(d["set"] == s for d in privacy) for s in {d["set"] for d in privacy}} == {
        "privacy_forget": 4, "privacy_retain": 16, "privacy_holdout": 2}
    assert len(build_docs(DuskOptions(dusk_set="verbatim", data_dir=str(dusk_dir), max_items_per_split=2))) == 2


def test_the_github_release_layout_gives_the_hub_documents_and_its_files_exact_text(dusk_dir, tmp_path):
    release = write_dusk_corpus(tmp_path / "clone", layout="release")
    for data_dir in (release, release / "data" / "Prof"):  # a clone of the repository, or its data/Prof/
        for measure in ("verbatim", "forget_qa", "shared_qa", "retain_qa", "privacy"):
            assert build_docs(DuskOptions(dusk_set=measure, data_dir=str(data_dir))) == \
                build_docs(DuskOptions(dusk_set=measure, data_dir=str(dusk_dir))), (data_dir, measure)
    # the membership-inference texts are the files as the release's evaluation reads them: f.read().strip()
    prof = release / "data" / "Prof"
    texts = privacy_texts(DuskOptions(dusk_set="privacy", data_dir=str(release)))
    assert texts["forget"] == [(prof / "Chronological.txt").read_text().strip()]
    assert texts["holdout"] == [(prof / "eval" / "holdout.txt").read_text().strip()]
    assert texts["retain"] == [(prof / f).read_text().strip() for f in
                               ("Feature_Story.txt", "Interview.txt", "Inverted_Pyramid.txt", "Listicle.txt")]
    assert texts == privacy_texts(DuskOptions(dusk_set="privacy", data_dir=str(dusk_dir)))
    (prof / "eval" / "GeneralQA.jsonl").unlink()
    with pytest.raises(DataError, match=r"release's folder .*: expected .*eval/GeneralQA\.jsonl"):
        build_docs(DuskOptions(dusk_set="shared_qa", data_dir=str(release)))


def test_hub_rows_that_are_chunks_of_the_release_files_give_the_release_text(dusk_dir, tmp_path):
    """Rows cut from the release's files anywhere (mid-word, inside the blank lines, one empty) are joined with
    nothing, rows that are whole documents with the release's separator: both give the files' stripped text."""
    release = write_dusk_corpus(tmp_path / "clone", layout="release") / "data" / "Prof"
    chunks = write_dusk_corpus(tmp_path / "chunks", layout="chunks")
    texts = privacy_texts(DuskOptions(dusk_set="privacy", data_dir=str(chunks)))
    assert texts["forget"] == [(release / "Chronological.txt").read_text().strip()]
    assert texts["holdout"] == [(release / "eval" / "holdout.txt").read_text().strip()]
    assert texts == privacy_texts(DuskOptions(dusk_set="privacy", data_dir=str(dusk_dir)))
    assert raw_text("AI-ISL/DUSK", "retain_listicle", str(chunks)) == (release / "Listicle.txt").read_text().strip()
    privacy = build_docs(DuskOptions(dusk_set="privacy", data_dir=str(chunks)))
    assert privacy == build_docs(DuskOptions(dusk_set="privacy", data_dir=str(dusk_dir)))


def test_the_readme_configs_win_and_a_missing_file_is_named(dusk_dir, tmp_path):
    import shutil

    folder = tmp_path / "moved"
    shutil.copytree(dusk_dir, folder)
    (folder / "eval_icl-00000-of-00001.parquet").rename(folder / "icl_elsewhere.parquet")
    readme = folder / "README.md"
    readme.write_text(readme.read_text().replace('"eval_icl-*.parquet"', '"icl_elsewhere.parquet"'))
    assert build_docs(DuskOptions(dusk_set="shared_qa", data_dir=str(folder)))[0]["icl_answers"] == [PROFS[0][4]]
    (folder / "eval_general_qa-00000-of-00001.parquet").unlink()
    with pytest.raises(DataError, match=r"No file for DUSK eval_general_qa/eval in .*eval_general_qa-00000-of-00001"):
        build_docs(DuskOptions(dusk_set="shared_qa", data_dir=str(folder)))


def test_privacy_passages_are_whole_token_windows_of_each_style(dusk_dir, tok):
    docs = build_docs(DuskOptions(dusk_set="privacy", data_dir=str(dusk_dir), dusk_mia_window=16), tok)
    forget = raw_text("AI-ISL/DUSK", "forget_chronological", str(dusk_dir))
    assert forget.count(DOCUMENT_SEPARATOR) == len(PROFS) - 1
    ids = tok(forget, add_special_tokens=True)["input_ids"]
    expected = [tok.decode(ids[i:i + 16], skip_special_tokens=True) for i in range(0, len(ids) // 16 * 16, 16)]
    assert [d["text"] for d in docs if d["set"] == "privacy_forget"] == expected
    retain = [d["text"] for d in docs if d["set"] == "privacy_retain"]
    per_style = [windows(tok, raw_text("AI-ISL/DUSK", s, str(dusk_dir)), 16) for s in
                 ("retain_feature_story", "retain_interview", "retain_inverted_pyramid", "retain_listicle")]
    assert retain == [w for style in per_style for w in style]  # each style cut on its own, a short rest dropped
    with pytest.raises(DataError, match="shorter than one window of 100000 tokens; lower dusk_mia_window"):
        build_docs(DuskOptions(dusk_set="privacy", data_dir=str(dusk_dir), dusk_mia_window=100000), tok)


def test_reference_numbers_are_checked(tmp_path):
    ref = load_reference({"auc_forget_holdout": 0.5, "auc_holdout_retain": 0.25})
    assert ref.auc == {"auc_forget_holdout": 0.5, "auc_holdout_retain": 0.25}
    with pytest.raises(ReferenceLogError, match="unknown key"):
        load_reference({"auc": 0.5})
    with pytest.raises(ReferenceLogError, match=r"auc_holdout_retain must be an AUROC in \(0, 1\]"):
        load_reference({"auc_forget_holdout": 0.5, "auc_holdout_retain": 2})
    with pytest.raises(ReferenceLogError, match="holds no dusk_privacy results"):
        load_reference(str(tmp_path))
    # a dusk_privacy run's results file (what the task writes): found in its output folder, never the model's own
    import json

    from unlearn_tasks.dusk.reference import reference_record

    record = reference_record({"auc_forget_holdout": 0.45, "auc_holdout_retain": 0.55}, {"pretrained": "retrain"},
                              {"forget": 2, "retain": 8, "holdout": 2}, 0.4, 1024)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results_2026-01-01T00-00-00.json").write_text(json.dumps(
        {"configs": {"dusk_privacy": {"unlearning_reference": record}}, "config": {"model_args": "pretrained=retrain"}}))
    ref = load_reference(str(tmp_path / "run"), {"pretrained": "target"})
    assert ref.auc == {"auc_forget_holdout": 0.45, "auc_holdout_retain": 0.55} and ref.path.endswith(".json")
    with pytest.raises(ReferenceLogError, match="produced by the model being evaluated"):
        load_reference(str(tmp_path / "run"), {"pretrained": "retrain"})
    with pytest.raises(ValueError, match="dusk_mia_window must be a whole number >= 2"):
        DuskOptions.from_metadata({"dusk_set": "privacy", "dusk_mia_window": 1})


def test_unlearn_run_then_every_dusk_metric_follows_from_the_samples(tiny_model_dir, dusk_dir, tok, tmp_path, capsys):
    from harness_ext.evaluate import run_lm_eval
    from unlearn_app.cli import main

    ckpt = tmp_path / "ga"
    code = main(["run", "--method", "ga", "--model", str(tiny_model_dir), "--out", str(ckpt), "--data", "dusk",
                 "--data-dir", str(dusk_dir), "--full", "--epochs", "1", "--batch-size", "2", "--max-length", "32",
                 "--quiet"])
    assert code == 0, capsys.readouterr().err
    config = (ckpt / "unlearn_config.yaml").read_text()
    assert "forget: forget_chronological" in config and "retain_feature_story,retain_interview" in config

    reference = {"auc_forget_holdout": 0.5, "auc_holdout_retain": 0.4}
    metadata = {"data_dir": str(dusk_dir), "dusk_mia_window": 16, "dusk_verbatim_max_tokens": 8,
                "dusk_qa_max_tokens": 4, "dusk_reference": reference, "max_items_per_split": 3}
    res = run_lm_eval(ckpt, ["dusk"], tmp_path / "out", metadata, batch_size=8, log_samples=True)
    results = res["results"]
    for task in TASKS:
        assert set(k.split(",")[0] for k in results[task] if "," in k and "stderr" not in k) == set(
            scoring.metric_names(task.removeprefix("dusk_")))

    directions = res["higher_is_better"]
    assert directions["dusk_verbatim"]["verbatim_rougeL"] is False and directions["dusk_shared_qa"]["shared_rougeL"]
    assert directions["dusk_privacy"]["retain_deviation"] is False and directions["dusk_verbatim"]["verbatim_levenshtein"]
    verbatim = res["samples"]["dusk_verbatim"]
    assert len(verbatim) == 3
    refs = [truncate_reference(tok, s["doc"]["reference"], 8) for s in verbatim]
    records = [scoring.generation_record("verbatim", r, s["resps"][0][0]) for r, s in zip(refs, verbatim)]
    for key in ("rougeL", "rougeL_recall", "lcs", "levenshtein"):
        assert results["dusk_verbatim"][f"verbatim_{key},none"] == pytest.approx(sum(r[key] for r in records) / 3)
    shared = res["samples"]["dusk_shared_qa"]
    values = [scoring.rouge(s["doc"]["reference"], s["resps"][0][0].split("\n\n")[0])["rougeL"] for s in shared]
    assert results["dusk_shared_qa"]["shared_rougeL,none"] == pytest.approx(sum(values) / len(values))

    scores = {"privacy_forget": [], "privacy_retain": [], "privacy_holdout": []}
    for s in sorted(res["samples"]["dusk_privacy"], key=lambda s: s["doc"]["index"]):
        response = s["resps"][0][0]  # lm-eval logs the response dict as its repr
        r = ast.literal_eval(response) if isinstance(response, str) else response
        scores[s["doc"]["set"]].append(scoring.min_k_plus_plus(r["logprobs"], r["vocab_mean"], r["vocab_var"], 0.4))
    auc_fh = scoring.auroc(scores["privacy_forget"], scores["privacy_holdout"])
    auc_hr = scoring.auroc(scores["privacy_holdout"], scores["privacy_retain"])
    privacy = results["dusk_privacy"]
    assert privacy["auc_forget_holdout,none"] == pytest.approx(auc_fh)
    assert privacy["privleak,none"] == pytest.approx((auc_fh - 0.5) / 0.5 * 100)
    assert privacy["retain_deviation,none"] == pytest.approx(abs(auc_hr - 0.4) / 0.4 * 100)
    record = res["configs"]["dusk_privacy"]["unlearning_reference"]
    assert record["auc"]["auc_holdout_retain"] == pytest.approx(auc_hr) and not math.isnan(auc_hr)
    assert record["passages"] == {k.split("_")[1]: len(v) for k, v in scores.items()}


def test_unlearn_run_data_dusk_takes_styles_and_names_a_wrong_one():
    from unlearn_methods.config import load_run_config
    from unlearn_methods.data_sources import data_source

    source = data_source("dusk")
    cfg = load_run_config(None, method="ga", model="m", out="o", data="dusk", forget="retain_interview",
                          retain="forget_chronological")
    source.resolve_splits(cfg)
    assert (cfg.forget, cfg.retain) == ("retain_interview", "forget_chronological")
    with pytest.raises(ValueError, match="--forget 'chronological' is not a DUSK style; use one of forget_chronological"):
        load_run_config(None, method="ga", model="m", out="o", data="dusk", forget="chronological")
    with pytest.raises(ValueError, match="--retain 'retain_interview': retain_interview is not a DUSK style other than"):
        load_run_config(None, method="ga", model="m", out="o", data="dusk", forget="retain_interview",
                        retain="retain_interview")
