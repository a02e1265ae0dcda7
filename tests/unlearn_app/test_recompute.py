"""Every benchmark family's aggregates recomputed from lm-eval's samples files (``--log_samples``) with the tasks'
own aggregation: per family a small lm-eval output (results file + samples in lm-eval's schema, per-document records
in the shape each task's ``process_results`` returns) whose aggregates are computed by hand here. Each is checked
through ``unlearn submit``'s builder and ``leaderboard validate``: (a) every number recomputed and equal, (b) an
edited aggregate caught as a mismatch, (c) an edited per-sample value changes the recomputation."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from unlearn_app.leaderboard.recompute import SamplesError, parse_samples, recompute_task
from unlearn_app.leaderboard.submission import build, write
from unlearn_app.leaderboard.validate import check_folder

STAMP = "2026-01-01T00-00-00.000001"


def sample_line(doc_id: int, doc: dict, values: dict) -> dict:
    """One line of lm-eval's samples file (``EvaluationTracker.save_results_samples``'s fields)."""
    return {"doc_id": doc_id, "doc": doc, "target": "t", "arguments": {"gen_args_0": {"arg_0": "p", "arg_1": {}}},
            "resps": [["x"]], "filtered_resps": ["x"], "filter": "none", "metrics": list(values),
            "doc_hash": "0" * 64, "prompt_hash": "0" * 64, "target_hash": "0" * 64, **values}


def write_run(folder: Path, tasks: dict[str, tuple[list, dict[str, float]]], groups: dict | None = None,
              modes: dict | None = None) -> Path:
    """``folder/results_<STAMP>.json`` with each task's ``aggregates`` and ``samples_<task>_<STAMP>.jsonl`` with
    each document's record under every metric name (as our tasks' ``process_results`` return it); ``tasks``:
    ``{task: ([(doc, record), ...], aggregates)}``; ``groups``: ``{group: aggregates}`` (rows without samples)."""
    folder.mkdir(parents=True, exist_ok=True)
    results, configs = {}, {}
    for task, (docs, aggregates) in tasks.items():
        results[task] = {"alias": task, **{f"{m},none": v for m, v in aggregates.items()},
                         **{f"{m}_stderr,none": "N/A" for m in aggregates}}
        configs[task] = {"task": task, "provenance": {"package": "lm-eval-unlearning", "version": "0.1.0",
                                                      "git_commit": "c" * 40, "metric_modes": dict(modes or {})}}
        lines = [sample_line(i, doc, {m: record for m in aggregates}) for i, (doc, record) in enumerate(docs)]
        (folder / f"samples_{task}_{STAMP}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    for group, aggregates in (groups or {}).items():
        results[group] = {"alias": group, **{f"{m},none": v for m, v in aggregates.items()}}
    (folder / f"results_{STAMP}.json").write_text(json.dumps({
        "results": results, "group_subtasks": {g: [] for g in groups or {}}, "configs": configs,
        "versions": {t: 1.0 for t in results}, "lm_eval_version": "0.4.13", "git_hash": "abc1234",
        "upper_git_hash": None, "transformers_version": "4.57.0"}))
    return folder


def validate(run: Path, tmp: Path):
    built = build([run], model_id="org/model", revision="0" * 40, method="ga")
    return built, check_folder(write(built, tmp / "board"))


# --------------------------------------------------------------------------- the families, by hand
def knowundo():
    rows = [("unlearn", 0.25, -1.0), ("unlearn", 0.75, -3.0), ("retention", 0.5, -1.0), ("retention", 1.0, -1.0)]
    docs = [({"scope": s}, {"scope": s, "accuracy": a, "mean_logprob": m}) for s, a, m in rows]
    return "knowundo_privacy", docs, {"unlearn_success": 50.0, "retention_success": 75.0, "unlearn_accuracy": 50.0,
                                      "unlearn_perplexity": math.exp(2.0), "retention_perplexity": math.e}


def rwku():
    rows = [("fb", 0.2), ("fb", 0.4), ("qa", 0.9)]
    docs = [({"type_slug": s}, {"set": "forget_level3", "subject": "A", "type_slug": s, "prediction": "",
                                "rougeL_recall": v, "unscorable": False}) for s, v in rows]
    return "rwku_forget_level3", docs, {"forget_level3": 0.5, "forget_level3_fb": 0.3, "forget_level3_qa": 0.9}


def tofu_formats():
    docs = [({"role": r}, [r, v]) for r, v in (("forget", 1.0), ("forget", 0.0), ("retain", 1.0), ("retain", 1.0))]
    return "tofu_mcqa", docs, {"forget_acc": 0.5, "retain_acc": 1.0, "forget_retain_gap": -0.5}


def lume():
    docs = [({"set": s, "kind": k}, {"set": s, "kind": k, "answer": "", "score": v})
            for s, k, v in (("forget", "regurgitation", 0.25), ("forget", "regurgitation", 0.75),
                            ("forget", "knowledge", 0.5), ("retain", "regurgitation", 0.5),
                            ("retain", "knowledge", 0.0), ("retain", "knowledge", 1.0))]
    return "lume_task1", docs, {"forget_regurgitation": 0.5, "forget_knowledge": 0.5, "retain_regurgitation": 0.5,
                                "retain_knowledge": 0.5}


def dusk():
    keys = ("rougeL", "rougeL_recall", "rouge1", "rouge1_recall")
    docs = [({"set": "forget_qa", "index": i}, {"set": "forget_qa", "index": i, **dict(zip(keys, vals, strict=True))})
            for i, vals in enumerate([(0.1, 0.2, 0.3, 0.4), (0.3, 0.4, 0.5, 0.6)])]
    return "dusk_forget_qa", docs, {"unique_forget_rougeL": 0.2, "unique_forget_rougeL_recall": 0.3,
                                    "unique_forget_rouge1": 0.4, "unique_forget_rouge1_recall": 0.5}


def blur():
    docs = [({"set": "combined"}, {"set": "combined", "file": "f", "question": f"q{i}", "answer": "a",
                                   "rougeL_recall": v}) for i, v in enumerate((0.2, None, 0.6))]
    return "blur_tofu", docs, {"combined_rougeL_recall": 0.4}  # the None (a base answer with no word) left out


def clear():
    rows = [(0.5, 0.8, 0.25), (1.0, 0.4, 1.5)]
    docs = [({"split": "real_world", "index": i}, {"split": "real_world", "index": i, "rougeL_recall": r, "prob": p,
                                                   "truth_ratio": t}) for i, (r, p, t) in enumerate(rows)]
    return "clear_real_world", docs, {"real_world_rougeL_recall": 0.75, "real_world_prob": 0.6,
                                      "real_world_truth_ratio": 0.375}  # mean(max(0, 1 - R)) = (0.75 + 0) / 2


def margins():
    rows = [("forget", 1.0), ("forget", 3.0), ("holdout", -2.0)]
    docs = [({"split": s}, {"sample": i, "margin": m, "split": s, "n_tokens": 2, "key": f"k{i}", "tokens": [m]})
            for i, (s, m) in enumerate(rows)]
    return "margins_tofu_forget01", docs, {"margin": 2 / 3, "margin_forget": 2.0, "margin_holdout": -2.0}


def mllmu():
    gen = [{"set": "forget", "part": "generation", "response": "r", "rouge1": 0.5, "rouge2": 0.0, "rougeL": r,
            "bleu": b} for r, b in ((0.5, 0.1), (0.25, 0.0))]
    cls = [{"set": "forget", "part": "classification", "response": c, "choice": c, "classification_acc": a}
           for c, a in (("A", 1.0), (None, 0.0))]
    cloze = [{"set": "forget", "part": "cloze", "response": "Lisbon", "cloze_acc": 1.0}]
    docs = [({"set": r["set"], "part": r["part"]}, r) for r in gen + cls + cloze]
    return "mllmu_forget05_image", docs, {"forget_rougeL": 0.375, "forget_bleu": 0.05,  # release mode: percent
                                          "forget_classification_acc": 50.0, "forget_cloze_acc": 100.0}


FAMILIES = [knowundo, rwku, tofu_formats, lume, dusk, blur, clear, margins, mllmu]


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_every_aggregate_is_recomputed_and_an_edit_is_caught(family, tmp_path):
    task, docs, expected = family()
    built, check = validate(write_run(tmp_path / "run", {task: (docs, expected)}), tmp_path / "a")
    entry = built.record["results"][task]
    assert entry["samples"] == f"samples/{task}.jsonl" and entry["samples"] in built.record["files"]
    assert entry["produced_by"]["lm_eval"] == "0.4.13" and entry["produced_by"]["transformers"] == "4.57.0"
    assert check.ok, check.errors
    assert check.recomputed[task] == pytest.approx(expected) and task not in check.unverified  # (a)

    metric = sorted(expected)[0]  # (b) one aggregate edited in the results file
    _, check = validate(write_run(tmp_path / "edited", {task: (docs, expected | {metric: expected[metric] + 0.01})}),
                        tmp_path / "b")
    assert check.mismatched == {task: [metric]} and len(check.errors) == 1 and metric in check.errors[0]

    rows = parse_samples((tmp_path / "run" / f"samples_{task}_{STAMP}.jsonl").read_bytes(), task)  # (c)
    first = rows[0][metric]
    value_key = next(k for k in ("accuracy", "rougeL_recall", "score", "rougeL", "margin") if isinstance(first, dict)
                     and k in first) if isinstance(first, dict) else 1
    for row in rows:
        for m in expected:
            row[m] = json.loads(json.dumps(row[m]))
    for m in expected:
        rows[0][m][value_key] = 0.123456
    again = recompute_task(task, rows, expected)
    assert any(not math.isclose(again.values[m], expected[m]) for m in expected)


def test_lume_group_scores_follow_their_tasks_and_mmlu(tmp_path):
    """LUME's group row (task_aggregate, mia_score, mmlu_acc, final_score) from the recomputed tasks; MMLU (lm-eval's
    own task, ``mean`` of ``acc``, groups weighted by size) from its subtasks' samples."""
    from harness_ext.task_index import task_manager

    _, task1, _ = lume()
    parts = {f"lume_task{n}": (task1, lume()[2]) for n in (1, 2, 3)}
    mia = [({"set": s}, {"set": s, "kind": "mia", "loss": v}) for s, v in
           (("member", 1.0), ("member", 2.0), ("nonmember", 3.0), ("nonmember", 4.0))]
    parts["lume_mia"] = (mia, {"mia_loss_auc": 1.0, "mia_score": 0.0, "mia_member_loss": 1.5,
                               "mia_nonmember_loss": 3.5})
    index = task_manager(["mmlu"]).task_index
    subtasks = sorted(n for n, e in index.items() if n.startswith("mmlu_") and e.kind.name == "TASK"
                      and (e.cfg or {}).get("tag", "").startswith("mmlu_") and "_tasks" in (e.cfg or {}).get("tag", ""))
    assert len(subtasks) == 57
    # one document per subtask, two for the first: acc 1 on even positions
    for i, name in enumerate(subtasks):
        docs = [({}, float(i % 2 == 0))] + ([({}, 0.0)] if i == 0 else [])
        parts[name] = (docs, {"acc": float(np.mean([d[1] for d in docs]))})
    mmlu = 29 / 58  # 29 correct of 58 documents: lm-eval weights each group's members by their size
    final = (0.5 + 0.0 + mmlu) / 3
    groups = {"lume": {"task_aggregate": 0.5, "mia_score": 0.0, "mmlu_acc": mmlu, "final_score": final},
              "mmlu": {"acc": mmlu}}
    _, check = validate(write_run(tmp_path / "run", parts, groups), tmp_path)
    assert check.ok, check.errors
    assert check.recomputed["lume"] == pytest.approx(groups["lume"]) and check.recomputed["mmlu"]["acc"] == \
        pytest.approx(mmlu)
    assert not check.unverified

    groups["lume"]["final_score"] += 0.01  # an edited group score is caught
    _, check = validate(write_run(tmp_path / "edited", parts, groups), tmp_path / "b")
    assert check.mismatched == {"lume": ["final_score"]}

    del parts["mmlu_anatomy"]  # without one MMLU subtask's samples, what reads MMLU is unverified, the rest not
    _, check = validate(write_run(tmp_path / "partial", parts, groups), tmp_path / "c")
    assert check.unverified["lume"] == ["final_score", "mmlu_acc"] and check.unverified["mmlu"] == ["acc"]
    assert check.recomputed["lume"] == pytest.approx({"task_aggregate": 0.5, "mia_score": 0.0})


def test_waterdrum_is_recomputed_with_the_validators_tokenizer(tmp_path, monkeypatch):
    """WaterDrum's strengths need the verification tokenizer: the validator's own (never the run's), else every
    number is unverified with the reason. The verifier is a table here (generation -> scores under ids 1, 2)."""
    from unlearn_tasks.waterdrum import aggregate

    table = {"a": ([0.8, 0.2], 2), "b": ([0.4, 0.6], 2), "c": ([0.1, 0.9], 1)}
    encoder = SimpleNamespace(vocab_size=64, encode=lambda text: [])  # the validator's; the run's size (50) is an option

    def verify_texts(gens, ids, k_p, tokenizer=None, vocab_size=None, workers=None, return_lengths=False):
        assert tokenizer is encoder and vocab_size == 50
        return (np.array([table[g][0] for g in gens])[:, :, None], np.array([table[g][1] for g in gens]))

    monkeypatch.setattr(aggregate, "verify_texts", verify_texts)
    records = [{"kind": "text", "split": "forget", "owner": 1, "index": 0, "generations": ["a"], "rougeL_recall": 0.5,
                "knowmem": float("nan"), "min_k": 1.0},
               {"kind": "text", "split": "retain", "owner": 2, "index": 1, "generations": ["b", "c"],
                "rougeL_recall": 0.25, "knowmem": float("nan"), "min_k": 3.0}]
    rows = [sample_line(i, {"kind": "text", "owner": r["owner"]}, {"forget_strength": r}) for i, r in enumerate(records)]
    rows = parse_samples("".join(json.dumps(r) + "\n" for r in rows).encode(), "w")
    claimed = {"forget_strength": 0.8, "retain_strength": (0.6 * 2 + 0.9 * 1) / 3, "other_id_strength": (0.2 + 0.4 * 2 / 3 + 0.1 / 3) / 2}
    for r in rows:
        r.update({m: r["forget_strength"] for m in claimed})
    without = recompute_task("waterdrum_ax", rows, claimed, {"verify_tokenizer": "/etc/attacker"})
    assert not without.values and "verification tokenizer" in without.unverifiable["forget_strength"]
    again = recompute_task("waterdrum_ax", rows, claimed, {"verify_tokenizer": "/etc/attacker", "verify_vocab_size": 50},
                           trusted={"verify_tokenizer": encoder, "ids": "1,2"})
    assert again.values == pytest.approx(claimed)


def test_what_the_samples_cannot_give_is_unverified_with_the_reason(tmp_path):
    """Eval-DU / MQuAKE need their knowledge base (the validator's, never a path of the run); DUSK's PrivLeak a
    reference run's samples; a task nobody knows is unverified, not guessed."""
    du = recompute_task("evaldu", [], {"recall": 0.5}, {"data_dir": "/etc"})
    assert du.unverifiable == {"recall": "needs the knowledge base (give the validator's own Eval-DU data_dir or "
                                         "MQuAKE mquake_path)"}
    unknown = recompute_task("no_such_task_xyz", [], {"acc": 1.0})
    assert "not one" in unknown.unverifiable["acc"]


@pytest.mark.parametrize("content, message", [
    (b"\xff\xfe not utf-8", "not UTF-8"),
    (b'{"doc_id": 0, "doc": {}\n', "line 1: not a JSON line"),
    (b"[1, 2]\n", "line 1: not a sample"),
    (b'{"doc_id": 0}\n{"doc_id": 0}\n', "document 0 is logged twice"),
    (b"[" * 100_000 + b"\n", "line 1: not a JSON line"),
])
def test_malformed_samples_are_one_line_errors(content, message):
    with pytest.raises(SamplesError, match=message) as e:
        parse_samples(content, "samples/x.jsonl")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("edit, message", [
    (lambda r: r.pop("unlearn_success"), "document 0 has no value for unlearn_success"),
    (lambda r: r["unlearn_success"].update(accuracy=10 ** 400), "cannot be aggregated"),
    (lambda r: r["unlearn_success"].update(accuracy="high"), "cannot be aggregated"),
    (lambda r: r["unlearn_success"].pop("scope"), "cannot be aggregated"),
])
def test_hostile_sample_values_fail_that_submission_in_one_line(edit, message, tmp_path):
    task, docs, expected = knowundo()
    run = write_run(tmp_path / "run", {task: (docs, expected)})
    file = run / f"samples_{task}_{STAMP}.jsonl"
    rows = [json.loads(x) for x in file.read_text().splitlines()]
    edit(rows[0])
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _, check = validate(run, tmp_path)
    assert len(check.errors) == 1 and message in check.errors[0] and "\n" not in check.errors[0]
    assert check.errors[0].startswith(check.id)


def test_a_run_without_samples_says_to_rerun_with_log_samples(tmp_path):
    task, docs, expected = knowundo()
    run = write_run(tmp_path / "run", {task: (docs, expected)})
    (run / f"samples_{task}_{STAMP}.jsonl").unlink()
    built, check = validate(run, tmp_path)
    assert built.notes == [f"no samples file for {task}: rerun lm_eval with --log_samples to have their numbers "
                           "recomputed (without it they are shown unverified)"]
    assert check.ok and check.unverified == {task: sorted(expected)} and not check.recomputed


def test_unlearn_submit_prints_the_log_samples_line(tmp_path, capsys):
    from unlearn_app.cli import main

    task, docs, expected = knowundo()
    run = write_run(tmp_path / "run", {task: (docs, expected)})
    (run / f"samples_{task}_{STAMP}.jsonl").unlink()
    assert main(["submit", str(run), "--model-id", "org/model", "--revision", "0" * 40, "--method", "ga",
                 "--to", str(tmp_path / "board")]) == 0
    out = capsys.readouterr()
    assert f"unlearn submit: no samples file for {task}: rerun lm_eval with --log_samples" in out.err
    assert "0 aggregate(s) recomputed from per-item values, 5 unverified" in out.out


def _dusk_privacy(scores: dict[str, list[float]]) -> list:
    return [({"set": f"privacy_{s}", "index": i}, {"set": f"privacy_{s}", "index": i, "min_k_plus_plus": v})
            for s, values in scores.items() for i, v in enumerate(values)]


def test_dusk_privleak_is_recomputed_against_the_reference_runs_samples(tmp_path):
    """AUROCs by hand (label 1 ranked above label 0): the model's forget [1, 4] vs holdout [2, 3] is 2/4, holdout vs
    retain [2.5, 5] 3/4; the reference's 1 and 1/4. PrivLeak (0.5 - 1) / 1 * 100, retain deviation |0.75 - 0.25| /
    0.25 * 100."""
    model = _dusk_privacy({"forget": [1.0, 4.0], "holdout": [2.0, 3.0], "retain": [2.5, 5.0]})
    ref = _dusk_privacy({"forget": [1.0, 2.0], "holdout": [3.0, 4.0], "retain": [3.5, 1.0]})
    expected = {"auc_forget_holdout": 0.5, "auc_holdout_retain": 0.75, "privleak": -50.0, "retain_deviation": 200.0}
    write_run(tmp_path / "ref", {"dusk_privacy": (ref, {"auc_forget_holdout": 1.0, "auc_holdout_retain": 0.25})})
    run = write_run(tmp_path / "run", {"dusk_privacy": (model, expected)})
    built = build([run], reference=tmp_path / "ref", model_id="org/model", revision="0" * 40, method="ga")
    assert built.record["results"]["dusk_privacy"]["reference_samples"] == "reference/dusk_privacy/samples.jsonl"
    check = check_folder(write(built, tmp_path / "board"))
    assert check.ok, check.errors
    assert check.recomputed["dusk_privacy"] == pytest.approx(expected) and not check.unverified

    _, alone = validate(run, tmp_path / "alone")  # without the reference: PrivLeak unverified, not refused
    assert alone.ok and alone.unverified == {"dusk_privacy": ["privleak", "retain_deviation"]}
    assert alone.recomputed["dusk_privacy"] == pytest.approx({"auc_forget_holdout": 0.5, "auc_holdout_retain": 0.75})

    edited = write_run(tmp_path / "edited", {"dusk_privacy": (model, expected | {"privleak": -40.0})})
    _, check = validate(edited, tmp_path / "e")
    assert check.unverified == {"dusk_privacy": ["privleak", "retain_deviation"]}  # no reference given: not verified
    built = build([edited], reference=tmp_path / "ref", model_id="org/model", revision="0" * 40, method="ga")
    check = check_folder(write(built, tmp_path / "e2"))
    assert check.mismatched == {"dusk_privacy": ["privleak"]}


def test_evaldu_is_recomputed_with_the_validators_knowledge_base(tmp_path):
    """Eval-DU's metrics need the knowledge base's rules: with the validator's own copy (never the run's path) they
    are recomputed, and equal the release's scoring (``score``) of the per-fact correctness the samples hold."""
    from unlearn_tasks.deep_unlearning import load_evaldu, score, write_generated_evaldu

    kb_dir = tmp_path / "kb"
    write_generated_evaldu(kb_dir, 12, seed=0, n_targets=5)
    kb = load_evaldu(kb_dir)
    facts = [("relationship", i) for i in range(kb.n_relationships)] + [("biography", i) for i in range(kb.n_biographies)]
    correct = {f: n % 3 != 0 for n, f in enumerate(facts)}
    rel = [correct[("relationship", i)] for i in range(kb.n_relationships)]
    bio = [correct[("biography", i)] for i in range(kb.n_biographies)]
    target = kb.targets[0]
    expected = {m: score(rel, bio, target, kb)[m] for m in ("success_du", "recall", "acc_relationships",
                                                            "acc_biographies", "acc_all")}
    rows = [sample_line(n, {"kind": k, "index": i}, dict.fromkeys(expected, {"kind": k, "index": i,
                                                                               "correct": correct[(k, i)]}))
            for n, (k, i) in enumerate(facts)]
    rows = parse_samples("".join(json.dumps(r) + "\n" for r in rows).encode(), "evaldu")
    modes = {"target": target, "data_dir": "/etc"}
    assert recompute_task("evaldu", rows, expected, modes).unverifiable["recall"].startswith("needs the knowledge base")
    again = recompute_task("evaldu", rows, expected, modes, trusted={"data_dir": str(kb_dir)})
    assert again.values == pytest.approx(expected) and not again.unverifiable
    rows[0]["recall"]["correct"] = not rows[0]["recall"]["correct"]
    for m in expected:
        rows[0][m] = rows[0]["recall"]
    assert recompute_task("evaldu", rows, expected, modes, trusted={"data_dir": str(kb_dir)}).values != \
        pytest.approx(expected)


def test_an_aggregate_beyond_a_float_stays_unverified_not_a_traceback(tmp_path):
    """The samples path reads only numbers a float holds; such an aggregate is left to the board's own checks."""
    from unlearn_app.leaderboard.validate import Check, recompute_samples

    task, docs, expected = knowundo()
    built, _ = validate(write_run(tmp_path / "run", {task: (docs, expected)}), tmp_path)
    folder = tmp_path / "board" / built.id
    record = json.loads((folder / "submission.json").read_text())
    record["results"][task]["aggregates"]["unlearn_success"] = 10 ** 400
    check = Check(built.id, str(folder), unverified={task: sorted(expected)})
    recompute_samples(check, record, {rel: (folder / rel).read_bytes() for rel in record["files"]})
    assert not check.errors and check.unverified == {task: ["unlearn_success"]}
    assert check.recomputed[task] == pytest.approx({k: v for k, v in expected.items() if k != "unlearn_success"})


def test_a_reference_whose_samples_are_the_runs_own_nudged_is_no_distinct_evaluation(tmp_path):
    """The run's own per-document scores times (1 + 1e-9) as the reference would give PrivLeak 0 and retain deviation
    0 whatever the model: refused as a failure; scores off by 1e-5 (relative) are a distinct run."""
    model = _dusk_privacy({"forget": [1.0, 4.0], "holdout": [2.0, 3.0], "retain": [2.5, 5.0]})
    expected = {"auc_forget_holdout": 0.5, "auc_holdout_retain": 0.75, "privleak": 0.0, "retain_deviation": 0.0}

    def nudged(factor: float) -> list:
        return [(doc, rec | {"min_k_plus_plus": rec["min_k_plus_plus"] * factor}) for doc, rec in model]

    run = write_run(tmp_path / "run", {"dusk_privacy": (model, expected)})
    for name, factor, copy in (("near", 1 + 1e-9, True), ("far", 1 + 1e-5, False)):
        write_run(tmp_path / name, {"dusk_privacy": (nudged(factor), {"auc_forget_holdout": 0.5,
                                                                     "auc_holdout_retain": 0.75})})
        built = build([run], reference=tmp_path / name, model_id="org/model", revision="0" * 40, method="ga")
        check = check_folder(write(built, tmp_path / f"board-{name}"))
        refused = [e for e in check.errors if "no distinct evaluation" in e]
        assert bool(refused) is copy, check.errors
        if not copy:
            assert check.ok and check.recomputed["dusk_privacy"] == pytest.approx(expected)


def test_tofu_leak_at_k_is_recomputed_from_the_per_question_counts_without_the_nli_model(monkeypatch):
    """Leak@k from each question's leak count among its n = 200 samples (the release's defaults), by hand:
    1 - C(n-c, k) / C(n, k) averaged over the questions; the NLI model judged the samples in the run and is never
    loaded to validate."""
    import unlearn_tasks.classifier as classifier

    monkeypatch.setattr(classifier, "pair_labels", lambda *a, **k: pytest.fail("the NLI model was loaded"))
    counts = [0, 3, 200]
    rows = [sample_line(i, {"index": i, "question": "q", "answer": "a"},
                        {f"leak_at_{k}": {"index": i, "n": 200, "leaks": c} for k in (1, 2, 4, 8, 16, 32, 64, 128)})
            for i, c in enumerate(counts)]
    expected = {f"leak_at_{k}": sum(1 - math.comb(200 - c, k) / math.comb(200, k) for c in counts) / 3
                for k in (1, 2, 4, 8, 16, 32, 64, 128)}
    assert expected["leak_at_1"] == pytest.approx((0 + 3 / 200 + 1) / 3)
    again = recompute_task("tofu_forget01_leak", rows, expected)
    assert again.values == pytest.approx(expected, rel=1e-12) and not again.unverifiable
    rows[1]["leak_at_1"]["leaks"] = 4  # an edited count moves every Leak@k
    assert recompute_task("tofu_forget01_leak", rows, expected).values["leak_at_1"] != pytest.approx(expected["leak_at_1"])


@pytest.mark.parametrize("task", ["muse_news_knowmem_leak", "muse_books_verbmem_leak", "wmdp_bio_leak"])
def test_muse_and_wmdp_leak_at_k_are_recomputed_and_an_edit_is_caught(task, tmp_path, monkeypatch):
    """MUSE and WMDP Leak@k from each item's leak count among the release's n = 200 samples, by hand; one edited
    aggregate is exactly one mismatch; the NLI model is never loaded to validate."""
    import unlearn_tasks.classifier as classifier

    monkeypatch.setattr(classifier, "pair_labels", lambda *a, **k: pytest.fail("the NLI model was loaded"))
    counts = [0, 50, 200]
    docs = [({"index": i}, {"index": i, "n": 200, "leaks": c}) for i, c in enumerate(counts)]
    expected = {f"leak_at_{k}": sum(1 - math.comb(200 - c, k) / math.comb(200, k) for c in counts) / 3
                for k in (1, 2, 4, 8, 16, 32, 64, 128)}
    assert expected["leak_at_1"] == pytest.approx((0 + 50 / 200 + 1) / 3)
    assert expected["leak_at_2"] == pytest.approx((0 + 1 - (150 * 149) / (200 * 199) + 1) / 3)
    _, check = validate(write_run(tmp_path / "run", {task: (docs, expected)}), tmp_path / "a")
    assert check.ok, check.errors
    assert check.recomputed[task] == pytest.approx(expected, rel=1e-12) and task not in check.unverified
    _, check = validate(write_run(tmp_path / "edited", {task: (docs, expected | {"leak_at_4": expected["leak_at_4"]
                                                                                 + 0.01})}), tmp_path / "b")
    assert check.mismatched == {task: ["leak_at_4"]} and len(check.errors) == 1 and "leak_at_4" in check.errors[0]
