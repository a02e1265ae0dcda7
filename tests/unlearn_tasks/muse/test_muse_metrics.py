"""MUSE's metrics against hand-computed values: ROUGE-L F1, prompts, passage MIA scores, AUROC and PrivLeak."""

import math
import zlib

import numpy as np
import pytest
from sklearn.metrics import auc as area
from sklearn.metrics import roc_curve

from unlearn_tasks.metrics import mia
from unlearn_tasks.metrics.rouge import rouge_l_f1
from unlearn_tasks.muse.aggregate import compute_metrics, metric_names
from unlearn_tasks.muse.corpora import PUBLISHED_RETRAIN_AUC, corpus_of
from unlearn_tasks.muse.prompts import cut_at_stop, knowmem_messages, knowmem_prompt, truncate_reference
from unlearn_tasks.muse.scoring import passage_scores


def test_rouge_l_f1_by_hand():
    # LCS of "the cat sat on the mat" / "the cat lay on the mat" = "the cat on the mat" (5 of 6 tokens each side)
    assert rouge_l_f1("the cat sat on the mat", "the cat lay on the mat") == pytest.approx(5 / 6)
    # reference 4 tokens, generation 2 tokens, LCS 2: P = 1, R = 1/2, F1 = 2/3
    assert rouge_l_f1("Ada Quill the mayor", "Ada Quill") == pytest.approx(2 / 3)
    assert rouge_l_f1("anything", "") == 0.0


def test_rouge_is_unstemmed_as_muse_unless_asked():
    # MUSE's scorer has no stemmer: "cats running" and "cat run" share no token.
    assert rouge_l_f1("cats running", "cat run") == 0.0
    assert rouge_l_f1("cats running", "cat run", use_stemmer=True) == pytest.approx(1.0)


def test_knowmem_prompt_is_muse_format():
    icl = [("Who won?", "Ada"), ("Where?", "Arlow")]
    assert knowmem_prompt("When?", icl) == (
        "Question: Who won?\nAnswer: Ada\n\nQuestion: Where?\nAnswer: Arlow\n\nQuestion: When?\nAnswer: "
    )
    assert knowmem_prompt("When?", []) == "Question: When?\nAnswer: "
    assert knowmem_messages("When?", icl[:1]) == [
        {"role": "user", "content": "Who won?"}, {"role": "assistant", "content": "Ada"},
        {"role": "user", "content": "When?"},
    ]


def test_answer_cut_at_the_earliest_stop():
    assert cut_at_stop("Ada Quill\n\nQuestion: next") == "Ada Quill"
    assert cut_at_stop("Ada Quill\nQuestion: next") == "Ada Quill"
    assert cut_at_stop("Ada Question: Quill") == "Ada "
    assert cut_at_stop("Ada Quill") == "Ada Quill"


def test_verbmem_reference_is_the_first_tokens(muse_tiny_model_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(muse_tiny_model_dir)
    text = " Mayor Ada Quill said the library cost 10 thousand pounds."
    ids = tok(text, add_special_tokens=True)["input_ids"]
    assert len(ids) > 4
    assert truncate_reference(tok, text, 4) == tok.decode(ids[:4], skip_special_tokens=True)
    assert truncate_reference(tok, text, 1000) == text


def test_passage_scores_by_hand():
    text = "The town of Arlow."
    response = {"logprobs": [-1.0, -2.0, -3.0, -4.0], "vocab_mean": [-1.0] * 4, "vocab_var": [4.0] * 4}
    s = passage_scores(response, text, k=0.4)
    assert s["mia_loss"] == pytest.approx(2.5)  # mean NLL of the 4 passage tokens
    assert s["mia_zlib"] == pytest.approx(2.5 / len(zlib.compress(text.encode())))
    assert s["mia_min_k"] == pytest.approx(4.0)  # int(0.4 * 4) = 1 lowest log-prob: -4
    assert s["mia_min_k_plus_plus"] == pytest.approx(1.5)  # z = (-4 - -1) / 2
    no_stats = passage_scores({"logprobs": [-1.0, -2.0], "vocab_mean": None, "vocab_var": None}, text, 0.4)
    assert math.isnan(no_stats["mia_min_k_plus_plus"]) and no_stats["mia_loss"] == pytest.approx(1.5)


def _records():
    recs = [{"set": "verbmem_forget", "index": i, "rougeL_f1": v} for i, v in enumerate([1.0, 0.5])]
    recs += [{"set": "knowmem_forget", "index": 0, "rougeL_f1": 0.25}, {"set": "knowmem_retain", "index": 0, "rougeL_f1": 0.75}]
    for i, (loss, mink) in enumerate([(1.0, 1.0), (3.0, 2.0)]):
        recs.append({"set": "privleak_forget", "index": i, "mia_loss": loss, "mia_zlib": loss, "mia_min_k": mink,
                     "mia_min_k_plus_plus": mink})
    for i, (loss, mink) in enumerate([(2.0, 3.0), (4.0, 0.5)]):
        recs.append({"set": "privleak_holdout", "index": i, "mia_loss": loss, "mia_zlib": loss, "mia_min_k": mink,
                     "mia_min_k_plus_plus": mink})
    return recs


def test_corpus_metrics_by_hand():
    parts = ["verbmem", "knowmem", "privleak"]
    m = compute_metrics(_records(), parts, {"mia_min_k_auc": 0.6})
    assert list(m) == metric_names(parts)
    assert m["forget_verbmem"] == pytest.approx(0.75)
    assert m["forget_knowmem"] == pytest.approx(0.25) and m["retain_knowmem"] == pytest.approx(0.75)
    # Min-K%: holdout (3, 0.5) vs forget (1, 2): pairs holdout > forget are 3>1, 3>2 -> 2 of 4
    assert m["mia_min_k_auc"] == pytest.approx(0.5)
    # LOSS: holdout (2, 4) vs forget (1, 3): 2>1, 4>1, 4>3 -> 3 of 4
    assert m["mia_loss_auc"] == pytest.approx(0.75)
    # PrivLeak = ((1 - 0.5) - (1 - 0.6)) / (1 - 0.6) * 100 = 25
    assert m["privleak"] == pytest.approx(25.0)


def test_privleak_is_nan_without_reference_never_relative_to_half():
    m = compute_metrics(_records(), ["privleak"], None)
    assert math.isnan(m["privleak"]) and m["mia_min_k_auc"] == pytest.approx(0.5)
    assert set(m) == {"mia_loss_auc", "mia_zlib_auc", "mia_min_k_auc", "mia_min_k_plus_plus_auc", "privleak"}


def test_auc_convention_matches_muse_and_privleak_equals_muses_formula():
    rng = np.random.default_rng(0)
    forget, holdout = rng.normal(2.0, 1.0, 30), rng.normal(2.5, 1.0, 40)
    ours = mia.mia_auroc(forget, holdout)
    # MUSE: roc_curve(y, -score) with forget (its "nonmember" slot) labelled 0 and holdout 1.
    y = np.r_[np.zeros(30), np.ones(40)]
    fpr, tpr, _ = roc_curve(y, -np.r_[forget, holdout])
    muse_auc = area(fpr, tpr)
    assert ours == pytest.approx(1 - muse_auc)
    muse_ref = 0.4772  # MUSE's News retrain Min-40% AUROC, its convention
    muse_privleak = (muse_auc - muse_ref) / muse_ref * 100
    assert mia.privleak(ours, PUBLISHED_RETRAIN_AUC["news"]["mia_min_k_auc"]) == pytest.approx(muse_privleak)


def test_corpus_names():
    assert corpus_of("muse_news") == corpus_of("news") == corpus_of("muse-bench/MUSE-News") == "news"
    assert corpus_of("MUSE_BOOKS") == "books" and corpus_of("tofu") is None


def test_each_attack_reads_its_own_scores_and_privleak_reads_min_k():
    # four attacks with four different orderings: AUROC 1, 0, 3/4, 1/2 (holdout above forget in that many pairs)
    scores = {"mia_loss": ([1, 2], [3, 4]), "mia_zlib": ([4, 3], [1, 2]), "mia_min_k": ([1, 3], [2, 4]),
              "mia_min_k_plus_plus": ([1, 4], [2, 3])}
    recs = [{"set": s, "index": i, **{k: v[j][i] for k, v in scores.items()}}
            for j, s in enumerate(("privleak_forget", "privleak_holdout")) for i in range(2)]
    ref = {"mia_loss_auc": 0.9, "mia_zlib_auc": 0.8, "mia_min_k_auc": 0.5, "mia_min_k_plus_plus_auc": 0.6}
    m = compute_metrics(recs, ["privleak"], ref)
    got = [m[f"{k}_auc"] for k in scores]
    assert got == pytest.approx([1.0, 0.0, 0.75, 0.5])
    assert m["privleak"] == pytest.approx(((1 - 0.75) - 0.5) / 0.5 * 100)  # -50


def test_empty_set_is_nan_without_a_warning_and_the_reference_record():
    import warnings

    from unlearn_tasks.muse.aggregate import reference_record
    from unlearn_tasks.reference_logs import record_format

    recs = [r for r in _records() if r["set"] != "knowmem_retain"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # NaN decided here, not numpy's "Mean of empty slice"
        m = compute_metrics(recs, ["verbmem", "knowmem", "privleak"], None)
    assert math.isnan(m["retain_knowmem"]) and m["forget_knowmem"] == pytest.approx(0.25)
    ref = reference_record(recs, m, "news", {"k": 0.4})
    assert ref == {"format": record_format("muse"), "corpus": "news", "n_forget": 2, "n_holdout": 2,
                   "mia_auc": {f"mia_{a}_auc": m[f"mia_{a}_auc"] for a in ("loss", "zlib", "min_k", "min_k_plus_plus")},
                   "mia_loss": {"forget": [1.0, 3.0], "holdout": [2.0, 4.0]},  # per passage, for the reference MIA
                   "k": 0.4}
    assert ref["mia_auc"]["mia_loss_auc"] == pytest.approx(0.75) and ref["mia_auc"]["mia_min_k_auc"] == pytest.approx(0.5)
    assert math.isnan(reference_record(recs, {}, "news", {})["mia_auc"]["mia_loss_auc"])
