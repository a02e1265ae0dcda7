"""Per-item scoring through each benchmark's scorer, and every aggregation on fixtures where the alternatives differ.

Two kinds of wrong number these guard against: a benchmark's call of a shared helper changed at the call site
(ROUGE precision or F1 for recall, a summed log-likelihood for a per-token mean, ...), which the helper's own
tests do not see; and an aggregation changed where one or two values per group make the alternatives agree (mean
and median, micro and macro). Every expected value is computed by hand in a comment; no model is needed.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from unlearn_tasks.clear import scoring as clear_scoring
from unlearn_tasks.muse import aggregate as muse_aggregate
from unlearn_tasks.muse import scoring as muse_scoring
from unlearn_tasks.tofu import aggregate as tofu_aggregate

# ROUGE-L on "the cat sat on the mat" (6 tokens) vs "the cat sat" (3 tokens): the LCS is 3 tokens, so
# recall = 3/6 = 0.5, precision = 3/3 = 1, F1 = 2 * 0.5 * 1 / 1.5 = 2/3. A scorer that passes the wrong one of the
# three gives 1 or 2/3 where 0.5 is expected (or 0.5 where 2/3 is expected).
REFERENCE = "the cat sat on the mat"
SHORT = "the cat sat"
RECALL, F1 = 0.5, 2 / 3


def _lp(*values: float) -> dict:
    """An ``unlearn_answer_logprobs`` response: the answer's token log-probs (no argmax flags, no vocab stats)."""
    return {"logprobs": list(values)}


# ---------------------------------------------------------------------------------------------------- TOFU
@pytest.fixture(scope="module")
def tofu_task(demo_data_dir):
    from lm_eval.tasks import TaskManager

    from harness_ext import tasks_dir

    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata={"data_dir": str(demo_data_dir)})
    return tm.load(["tofu_forget01"])["tasks"]["tofu_forget01"]


def _tofu_doc(split: str, index: int = 0) -> dict:
    return {"id": f"{split}-{index}", "split": split, "index": index, "question": f"Who wrote book {index}?",
            "answer": REFERENCE, "paraphrased_answer": "a cat sat on a mat",
            "perturbed_answers": ["the dog ran", "a bird flew", "the fish swam"]}


def test_tofu_forget_item_through_process_results(tofu_task):
    # lm-eval's results for a forget document: the generation, then answer, paraphrase and 3 perturbed answers.
    # answer [-1, -3]: per-token mean -2, so prob = e^-2 = 0.135335 (a per-sequence sum would give e^-4);
    # paraphrase [-0.5, -0.5, -2]: mean -1; perturbed means -1, -2 ([-1, -3]), -3 ([-2, -4]);
    # truth ratio (geometric, TOFU's code) = exp(mean(-1, -2, -3) - (-1)) = exp(-1) = 0.367879
    # (arithmetic: (e^-1 + e^-2 + e^-3) / 3 / e^-1 = 0.184334 / 0.367879 = 0.501071, different);
    # LOSS = -mean(answer) = 2 (sum: 4); Min-K% (k 0.4 of 2 tokens -> 1 token, the lowest -3) = 3.
    results = [SHORT, _lp(-1.0, -3.0), _lp(-0.5, -0.5, -2.0), _lp(-1.0), _lp(-1.0, -3.0), _lp(-2.0, -4.0)]
    out = tofu_task.process_results(_tofu_doc("forget"), results)
    record = out["forget_rougeL_recall"]
    assert set(out) == set(tofu_task.aggregation())  # one record under every metric name
    assert record["rougeL_recall"] == pytest.approx(RECALL)
    assert record["prob"] == pytest.approx(math.exp(-2.0))
    assert record["truth_ratio"] == pytest.approx(math.exp(-1.0))
    assert record["mia_loss"] == pytest.approx(2.0)
    assert record["mia_min_k"] == pytest.approx(3.0)


def test_tofu_world_facts_item_normalises_over_the_options(tofu_task):
    # wf: answer then 3 perturbed (no paraphrase). answer mean -1 ([0, -2]), perturbed means -2, -2, -3 ([-2, -4]):
    # prob = e^-1 / (e^-1 + 2 e^-2 + e^-3) = 0.367879 / (0.367879 + 0.270671 + 0.049787) = 0.534447;
    # truth ratio = exp(mean(-2, -2, -3) - (-1)) = exp(-4/3) = 0.263597.
    results = [SHORT, _lp(0.0, -2.0), _lp(-2.0), _lp(-2.0), _lp(-2.0, -4.0)]
    record = tofu_task.process_results(_tofu_doc("wf"), results)["wf_prob"]
    e = math.exp
    assert record["prob"] == pytest.approx(e(-1) / (e(-1) + 2 * e(-2) + e(-3)))
    assert record["prob"] == pytest.approx(0.534447, abs=1e-6)
    assert record["truth_ratio"] == pytest.approx(e(-4 / 3))


def test_tofu_boundary_rule_in_the_tofu_scoring_mode():
    from unlearn_tasks.tofu.options import TofuOptions
    from unlearn_tasks.tofu.scoring import score_document

    # answer_scoring "tofu" on the plain prompt hides each answer's first token (TOFU's boundary rule):
    # answer [-5, -1, -3] -> [-1, -3], mean -2, prob e^-2 (all three: mean -3); LOSS 2 (sum 4);
    # Min-K% also drops the last token (the EOS): [-1] -> 1 (k 0.4 of 1 token is that token).
    opts = TofuOptions.from_metadata({"answer_scoring": "tofu"})
    record = score_document(_tofu_doc("holdout"), None, [_lp(-5.0, -1.0, -3.0)], opts)
    assert record["prob"] == pytest.approx(math.exp(-2.0))
    assert record["mia_loss"] == pytest.approx(2.0)
    assert record["mia_min_k"] == pytest.approx(1.0)


def _tofu_records() -> list[dict]:
    """Three items per set with one skewed value, so mean and median differ."""
    records = []
    rouge = [0.0, 0.1, 0.8]  # mean 0.3, median 0.1
    probs = [0.1, 0.2, 0.9]  # mean 0.4, median 0.2
    ratios = [0.5, 2.0, 4.0]  # forget: min(R, 1/R) = 0.5, 0.5, 0.25 -> mean 5/12; retain: max(0, 1-R) = 0.5, 0, 0 -> 1/6
    for split in ("forget", "retain", "ra", "wf"):
        for i in range(3):
            records.append({"split": split, "index": i, "rougeL_recall": rouge[i], "prob": probs[i],
                            "truth_ratio": ratios[i]})
    return records


def test_tofu_aggregations_through_the_task(tofu_task):
    records = _tofu_records()
    agg = tofu_task.aggregation()
    assert agg["forget_rougeL_recall"](records) == pytest.approx(0.3)  # mean, not the median 0.1
    assert agg["retain_prob"](records) == pytest.approx(0.4)  # mean, not the median 0.2
    assert agg["forget_truth_ratio"](records) == pytest.approx(5 / 12)  # mean(min(R, 1/R)); median 0.5
    assert agg["ra_truth_ratio"](records) == pytest.approx(1 / 6)  # mean(max(0, 1 - R)); 1 - mean(R) < 0
    # Model Utility: harmonic mean of the 9 (retain, ra, wf) x (prob 0.4, ROUGE 0.3, truth ratio 1/6):
    # 9 / (3 / 0.4 + 3 / 0.3 + 3 * 6) = 9 / 35.5 = 0.253521 (arithmetic mean would be 0.288889).
    assert agg["model_utility"](records) == pytest.approx(9 / 35.5)


def test_tofu_memorization_mean_skips_items_without_a_score():
    # exact memorization 1.0, 0.0, absent, 0.5: mean of the scored three = 0.5 (counting the absent one as 0: 0.375).
    records = [{"split": "forget", "index": i, "exact_memorization": v, "extraction_strength": v}
               for i, v in enumerate([1.0, 0.0, 0.5])]
    records.insert(2, {"split": "forget", "index": 9})
    out = tofu_aggregate.compute_metrics(records, None)
    assert out["exact_memorization"] == pytest.approx(0.5)


# ---------------------------------------------------------------------------------------------------- MUSE
def test_muse_verbmem_and_knowmem_items_score_rouge_l_f1():
    # MUSE scores ROUGE-L F1 (unstemmed): 2/3 for the short continuation (recall would be 0.5).
    verb = muse_scoring.score_document({"set": "verbmem_forget", "index": 0}, SHORT, 0.4, lambda d: REFERENCE)
    assert verb["rougeL_f1"] == pytest.approx(F1)
    # KnowMem cuts the answer at MUSE's stop strings first: "the cat sat\n\nQuestion: ..." -> "the cat sat".
    know = muse_scoring.score_document({"set": "knowmem_forget", "index": 0}, SHORT + "\n\nQuestion: more on the mat",
                                       0.4, lambda d: REFERENCE)
    assert know["generation"] == SHORT and know["rougeL_f1"] == pytest.approx(F1)


def test_muse_privleak_passage_is_scored_per_token():
    # A passage of 5 token log-probs [-1, -1, -1, -2, -5]: LOSS = mean NLL = 10/5 = 2 (sum: 10);
    # Min-K% at k = 0.4: int(0.4 * 5) = 2 lowest tokens (-5, -2) -> 3.5.
    record = muse_scoring.score_document({"set": "privleak_forget", "index": 0, "text": "a b c d e"},
                                         _lp(-1.0, -1.0, -1.0, -2.0, -5.0), 0.4, lambda d: "")
    assert record["mia_loss"] == pytest.approx(2.0)
    assert record["mia_min_k"] == pytest.approx(3.5)


def test_muse_rouge_means_per_set():
    # forget VerbMem F1 0.0, 0.1, 0.8 -> mean 0.3 (median 0.1); retain KnowMem 0.2 and 0.6 -> 0.4, kept apart from
    # forget KnowMem 1.0 (pooling the two KnowMem sets would give 0.6).
    records = [{"set": "verbmem_forget", "index": i, "rougeL_f1": v} for i, v in enumerate([0.0, 0.1, 0.8])]
    records += [{"set": "knowmem_retain", "index": i, "rougeL_f1": v} for i, v in enumerate([0.2, 0.6])]
    records += [{"set": "knowmem_forget", "index": 0, "rougeL_f1": 1.0}]
    out = muse_aggregate.compute_metrics(records, ["verbmem", "knowmem"], None)
    assert out["forget_verbmem"] == pytest.approx(0.3)
    assert out["retain_knowmem"] == pytest.approx(0.4)
    assert out["forget_knowmem"] == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------------- CLEAR
def test_clear_caption_and_option_items():
    # forget_caption: answer, paraphrase, perturbed. answer [-1, -3] -> prob e^-2 (per-token mean);
    # paraphrase [-1] ; perturbed means -2 and -4 ([-3, -5]) -> truth ratio exp(-3 - (-1)) = e^-2.
    cap = {"split": "forget_caption", "index": 0, "answer": REFERENCE, "paraphrased": "x", "perturbed": ["y", "z"]}
    rec = clear_scoring.score_document(cap, SHORT, [_lp(-1.0, -3.0), _lp(-1.0), _lp(-2.0), _lp(-3.0, -5.0)],
                                       "all", "geometric")
    assert rec["rougeL_recall"] == pytest.approx(RECALL)
    assert rec["prob"] == pytest.approx(math.exp(-2.0))
    assert rec["truth_ratio"] == pytest.approx(math.exp(-2.0))
    # retain_facerec (options, no paraphrase): answer mean -1 ([0, -2]), perturbed -2, -3:
    # prob = e^-1 / (e^-1 + e^-2 + e^-3) = 0.367879 / 0.453337 = 0.665241; truth ratio exp(-2.5 + 1) = e^-1.5.
    opt = {"split": "retain_facerec", "index": 0, "answer": REFERENCE, "perturbed": ["y", "z"]}
    rec = clear_scoring.score_document(opt, None, [_lp(0.0, -2.0), _lp(-2.0), _lp(-3.0)], "all", "geometric")
    e = math.exp
    assert rec["prob"] == pytest.approx(e(-1) / (e(-1) + e(-2) + e(-3)))
    assert rec["truth_ratio"] == pytest.approx(e(-1.5))


def test_clear_set_means_and_truth_ratio_statistics():
    records = []
    for split in clear_scoring.SETS:
        for i, (rouge, prob, ratio) in enumerate([(0.0, 0.1, 0.5), (0.1, 0.2, 2.0), (0.8, 0.9, 4.0)]):
            records.append({"split": split, "index": i, "rougeL_recall": rouge, "prob": prob, "truth_ratio": ratio})
    out = clear_scoring.compute_metrics(records, "default", None)
    assert out["forget_caption_rougeL_recall"] == pytest.approx(0.3)  # mean; median 0.1
    assert out["real_world_prob"] == pytest.approx(0.4)  # mean; median 0.2
    assert out["forget_facerec_truth_ratio"] == pytest.approx(5 / 12)  # mean(0.5, 0.5, 0.25)
    assert out["retain_caption_truth_ratio"] == pytest.approx(1 / 6)  # mean(0.5, 0, 0)
    # Model Utility: harmonic mean of 12 numbers, 4 sets x (0.4, 0.3, 1/6): 12 / (4 * (2.5 + 10/3 + 6)) = 0.253521.
    assert out["model_utility"] == pytest.approx(12 / (4 * (2.5 + 10 / 3 + 6)))


# ---------------------------------------------------------------------------------------------------- RWKU
def _load(name: str, **metadata):
    from lm_eval.tasks import TaskManager

    from harness_ext import tasks_dir

    return TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata).load([name])["tasks"][name]


@pytest.fixture(scope="module")
def rwku_task(tmp_path_factory):
    from fixtures.rwku import write_rwku_corpus

    return _load("rwku_forget_level1", data_dir=str(write_rwku_corpus(tmp_path_factory.mktemp("rwku") / "hub", "hub")))


def test_rwku_probe_item_through_process_results(rwku_task):
    # The release's ROUGE-L recall counts distinct words: "the cat sat on the mat" has 5 ({the, cat, sat, on, mat}),
    # the answer "the cat sat" hits 3 -> 3/5 = 0.6 (Google's rouge-score recall, 3/6 = 0.5; F1 3/4 or 2/3).
    doc = {"set": "forget_level1", "subject": "Orla Venn", "type_slug": "", "answer": REFERENCE}
    record = rwku_task.process_results(doc, ["  the cat sat  "])[rwku_task.metric_names()[0]]
    assert record["prediction"] == SHORT  # stripped, as the release scores it
    assert record["rougeL_recall"] == pytest.approx(0.6)


def test_rwku_set_mean_pools_the_probes_and_per_target_keeps_each(rwku_task):
    from unlearn_tasks.rwku.task import compute_probe_metrics, per_target_metrics

    # Target A: 0.0, 0.1, 0.8 (mean 0.3, median 0.1); target B: 1.0 (one probe).
    # Set-level: mean over all 4 probes = 1.9 / 4 = 0.475 (the mean of the targets' means would be 0.65);
    # per type: "fill" (0.0, 1.0) -> 0.5, "qa" (0.1, 0.8) -> 0.45.
    rows = [("A", "fill", 0.0), ("A", "qa", 0.1), ("A", "qa", 0.8), ("B", "fill", 1.0)]
    records = [{"set": "forget_level1", "subject": s, "type_slug": t, "rougeL_recall": v} for s, t, v in rows]
    out = compute_probe_metrics(records, "forget_level1")
    assert out["forget_level1"] == pytest.approx(0.475)
    assert out["forget_level1_fill"] == pytest.approx(0.5) and out["forget_level1_qa"] == pytest.approx(0.45)
    per = per_target_metrics(records, is_mia=False)
    assert per["A"]["rougeL_recall"] == pytest.approx(0.3) and per["A"]["n"] == 3
    assert per["B"]["rougeL_recall"] == pytest.approx(1.0)


# ---------------------------------------------------------------------------------------------------- ReLU formats
@pytest.fixture(scope="module")
def relu_tasks(tmp_path_factory):
    from lm_eval.tasks import TaskManager

    from fixtures.tofu_formats import write_fixture
    from harness_ext import tasks_dir

    names = ["tofu_cloze", "tofu_comprehension_qa", "tofu_analogy_qa", "tofu_mcqa"]
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                     metadata={"data_dir": str(write_fixture(tmp_path_factory.mktemp("relu")))})
    return tm.load(names)["tasks"]


def _relu_doc(role: str, target: str = REFERENCE, gold: int = -1) -> dict:
    return {"id": f"{role}/0", "split": f"{role}10", "role": role, "index": 0, "prompt": "p", "target": target,
            "choices": ["A", "B", "C"], "gold": gold, "options": [], "max_gen_toks": 0, "context_ids": [],
            "target_ids": []}


def _only(out: dict, role: str) -> float:
    (value,) = {v for v in out.values()}  # one (role, value) under every metric name
    assert value[0] == role
    return value[1]


def test_relu_items_through_process_results(relu_tasks):
    # Cloze: the blank's tokens [-1, -3] and the appended EOS (-7, dropped): exp(mean(-1, -3)) = e^-2
    # (with the EOS: exp(-11/3); a product instead of the geometric mean: e^-4).
    cloze = relu_tasks["tofu_cloze"].process_results(_relu_doc("forget"), [_lp(-1.0, -3.0, -7.0)])
    assert _only(cloze, "forget") == pytest.approx(math.exp(-2.0))
    # Comprehension QA: mean of ROUGE-1, -2, -L F1. "the cat sat" vs "the cat sat on the mat":
    # ROUGE-1 P 3/3 R 3/6 F 2/3; ROUGE-2 P 2/2 R 2/5 F 4/7; ROUGE-L F 2/3 -> (2/3 + 4/7 + 2/3) / 3 = 40/63
    # (the recalls would give (1/2 + 2/5 + 1/2) / 3 = 7/15).
    qa = relu_tasks["tofu_comprehension_qa"].process_results(_relu_doc("retain"), [SHORT])
    assert _only(qa, "retain") == pytest.approx(40 / 63)
    # Analogy QA: ROUGE-L recall, 0.5 (F1 2/3).
    analogy = relu_tasks["tofu_analogy_qa"].process_results(_relu_doc("forget"), [SHORT])
    assert _only(analogy, "forget") == pytest.approx(RECALL)
    # MCQA: the letters' log-likelihoods (-2, -0.5, -1): argmax is B (index 1) -> 1 if gold is 1, 0 if gold is 2.
    mcqa = relu_tasks["tofu_mcqa"]
    results = [(-2.0, False), (-0.5, True), (-1.0, False)]
    assert _only(mcqa.process_results(_relu_doc("forget", gold=1), results), "forget") == 1.0
    assert _only(mcqa.process_results(_relu_doc("forget", gold=2), results), "forget") == 0.0


def test_relu_pair_aggregation_per_role(relu_tasks):
    # forget 0.0, 0.1, 0.8 -> mean 0.3 (median 0.1); retain 0.5, 1.0 and a NaN (skipped) -> 0.75;
    # gap = 0.3 - 0.75 = -0.45 (pooling both roles would give mean 0.48).
    items = [("forget", 0.0), ("retain", 0.5), ("forget", 0.1), ("retain", float("nan")), ("forget", 0.8),
             ("retain", 1.0)]
    from unlearn_tasks.tofu_formats.formats import pair_metric_names

    task = relu_tasks["tofu_cloze"]
    agg = task.aggregation()
    forget, retain, gap = pair_metric_names(task.options.fmt)
    assert agg[forget](items) == pytest.approx(0.3)
    assert agg[retain](items) == pytest.approx(0.75)
    assert agg[gap](items) == pytest.approx(-0.45)


# ---------------------------------------------------------------------------------------------------- WaterDrum
def test_waterdrum_text_item_scores():
    from unlearn_tasks.waterdrum.options import WaterDrumOptions
    from unlearn_tasks.waterdrum.scoring import score_document

    opts = WaterDrumOptions(benchmark="tofu")  # plan: K samples, answer log-probs, a greedy KnowMem answer
    doc = {"id": "t0", "kind": "text", "split": "forget", "owner": 1, "index": 0, "reference": REFERENCE}
    # ROUGE-L recall averaged over the K samples: ("the cat sat" 0.5, the reference itself 1.0) -> 0.75
    # (F1: (2/3 + 1) / 2 = 5/6; the first sample only: 0.5). KnowMem: ROUGE-L F1 of the greedy answer, 2/3.
    # Min-K% at k 0.4 of [-1, -1, -1, -2, -5]: the 2 lowest (-5, -2) -> 3.5 (the whole mean: 2).
    results = [[SHORT, REFERENCE], _lp(-1.0, -1.0, -1.0, -2.0, -5.0), SHORT]
    record = score_document(doc, results, opts)
    assert record["generations"] == [SHORT, REFERENCE]
    assert record["rougeL_recall"] == pytest.approx(0.75)
    assert record["knowmem"] == pytest.approx(F1)
    assert record["min_k"] == pytest.approx(3.5)


# ---------------------------------------------------------------------------------------------------- KLoM margins
@pytest.fixture(scope="module")
def margins_task(demo_data_dir):
    return _load("margins_tofu_forget01", data_dir=str(demo_data_dir))


def _margins_doc(sample: int = 0, split: str = "forget") -> dict:
    return {"sample": sample, "split": split, "prompt": "Question: q\nAnswer:", "question": "q", "target": "a",
            "style": "tofu"}


def test_margins_item_through_process_results(margins_task):
    # Token margins [1, 3] and the appended EOS's 8 (dropped by default): the per-token mean is 2
    # (sum: 4; with the EOS: 4).
    out = margins_task.process_results(_margins_doc(), [{"logprobs": [-0.1] * 3, "margins": [1.0, 3.0, 8.0]}])
    record = out["margin"]
    assert record["margin"] == pytest.approx(2.0) and record["n_tokens"] == 2
    # From log-probs only: margin = log p - log(1 - p); p = 0.5 -> 0, p = 0.8 -> log 4, the EOS (p 0.9) dropped:
    # mean (0 + log 4) / 2 = log 2.
    lps = [math.log(0.5), math.log(0.8), math.log(0.9)]
    record = margins_task.process_results(_margins_doc(), [{"logprobs": lps}])["margin"]
    assert record["margin"] == pytest.approx(math.log(2.0))


def test_margins_means_per_split_and_over_samples(margins_task):
    # forget 0, 1, 8 (mean 3, median 1); retain 2 and a NaN (skipped) -> 2;
    # overall: mean over the 4 defined samples = 11/4 = 2.75 (the mean of the split means would be 2.5).
    rows = [("forget", 0.0), ("retain", 2.0), ("forget", 1.0), ("retain", float("nan")), ("forget", 8.0)]
    records = [{"sample": i, "split": s, "key": str(i), "margin": m, "n_tokens": 1, "tokens": None}
               for i, (s, m) in enumerate(rows)]
    metrics = margins_task.compute_metrics(records)
    assert metrics["margin_forget"] == pytest.approx(3.0)
    assert metrics["margin_retain"] == pytest.approx(2.0)
    assert metrics["margin"] == pytest.approx(2.75)


# ---------------------------------------------------------------------------------------------------- deep unlearning
def test_deep_unlearning_item_and_accuracies():
    from unlearn_tasks.deep_unlearning.metrics import accuracy_all, answer_is_correct, set_recall_and_accuracy

    # Per fact: the gold answer or an alias is a case-insensitive substring of the generation.
    assert answer_is_correct(" It was PARIS, I think", "Paris")
    assert answer_is_correct("the French capital", "Paris", ["french capital"])
    assert not answer_is_correct("Lyon", "Paris")
    # 10 relationship facts, forgotten = {0, 1, 5}; the minimal set {0, 1, 2}: recall = 2 hits / 3 members = 2/3;
    # accuracy on the other 7 facts = 1 - 1 forgotten (fact 5) / 7 = 6/7 (over all 10 facts: 7/10).
    forgotten = np.zeros(10, dtype=bool)
    forgotten[[0, 1, 5]] = True
    recall, acc_rel = set_recall_and_accuracy(forgotten, [0, 1, 2])
    assert recall == pytest.approx(2 / 3) and acc_rel == pytest.approx(6 / 7)
    # acc_all weights by counts: 2 biographies at 1.0 and the 7 facts outside the set at 6/7:
    # (2 * 1 + 7 * 6/7) / 9 = 8/9 (the plain mean of the two accuracies would be 13/14).
    assert accuracy_all(1.0, 2, 6 / 7, 10, 3) == pytest.approx(8 / 9)
