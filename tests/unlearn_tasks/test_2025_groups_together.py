"""DUSK, LUME, KnowUnDo and BLUR as four groups of one lm-eval invocation, each read from its own local folder in
the Hub layout (``$UNLEARN_DATA_DIR/<owner>/<name>``), BLUR's references written first by `unlearn blur-references`:
the groups' options coexist, LUME's aggregate is its own tasks' (and MMLU's) with the other groups beside it, and
`unlearn report` shows every new metric with its direction."""

from __future__ import annotations

import json
import math
import re

import pytest
from lm_eval.tasks import TaskManager

from fixtures.blur import write_blur_corpus
from fixtures.dusk import write_dusk_corpus
from fixtures.knowundo import write_knowundo_corpus
from fixtures.lume import write_lume_corpus, write_mmlu_fixture
from harness_ext import tasks_dir
from harness_ext.group_scores import plain_metrics
from unlearn_tasks.blur.options import SETS
from unlearn_tasks.lume.scoring import lume_scores

GROUPS = {"dusk": ("dusk_verbatim", "dusk_forget_qa", "dusk_shared_qa", "dusk_retain_qa", "dusk_privacy"),
          "lume": ("lume_task1", "lume_task2", "lume_task3", "lume_mia", "mmlu"),
          "knowundo": ("knowundo_copyright", "knowundo_privacy"),
          "blur": ("blur_rwku", "blur_whp", "blur_wmdp", "blur_tofu")}


def test_the_four_groups_in_one_invocation_then_unlearn_report(tiny_model_dir, tmp_path, monkeypatch, capsys):
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker

    from harness_ext.evaluate import save_results
    from unlearn_app.cli import main
    from unlearn_tasks.benchmarks import benchmark_of_task

    hub = tmp_path / "hub"
    write_dusk_corpus(hub / "AI-ISL" / "DUSK")
    write_lume_corpus(hub / "llmunlearningsemeval2025organization" / "semeval25-unlearning-dataset-public", "hub")
    write_knowundo_corpus(hub / "zjunlp" / "KnowUnDo")
    write_blur_corpus(hub / "forgelab" / "BLUR")
    monkeypatch.setenv("UNLEARN_DATA_DIR", str(hub))
    tokens = 2
    assert main(["blur-references", "--model", str(tiny_model_dir), "--out", str(tmp_path / "refs"),
                 "--max-tokens", str(tokens), "--batch-size", "16", "--device", "cpu"]) == 0, capsys.readouterr().err

    metadata = {"pretrained": str(tiny_model_dir), "max_items_per_split": 2, "blur_references": str(tmp_path / "refs"),
                "blur_max_tokens": tokens, "lume_max_tokens": tokens, "dusk_verbatim_max_tokens": tokens,
                "dusk_qa_max_tokens": tokens, "dusk_mia_window": 16,
                "dusk_reference": {"auc_forget_holdout": 0.5, "auc_holdout_retain": 0.5}}
    tm = TaskManager(include_path=[str(tasks_dir()), str(write_mmlu_fixture(tmp_path / "mmlu"))],
                     include_defaults=False, metadata=metadata)
    tracker = EvaluationTracker(output_path=str(tmp_path / "out"))
    res = simple_evaluate(model="hf", model_args=f"pretrained={tiny_model_dir},dtype=float32", tasks=list(GROUPS),
                          task_manager=tm, device="cpu", batch_size=16, bootstrap_iters=0, evaluation_tracker=tracker)
    save_results(tracker, res)
    results = res["results"]
    assert set(GROUPS) | {t for tasks in GROUPS.values() for t in tasks} <= set(results)
    for group, tasks in GROUPS.items():
        assert res["group_subtasks"][group] == list(tasks) or set(res["group_subtasks"][group]) == set(tasks)
    # LUME's aggregate from its own tasks and MMLU only, though three other groups ran beside it
    expected = lume_scores(plain_metrics({t: results[t] for t in GROUPS["lume"]}))
    for name, value in expected.items():
        assert results["lume"][f"{name},none"] == pytest.approx(value), name
    # their directions in the results (lm-eval rebuilds a group's from its tasks'), so its table shows the arrows
    assert {k: res["higher_is_better"]["lume"][k] for k in expected} == dict.fromkeys(expected, True)
    assert "final_score,none" not in results["dusk"] and "final_score,none" not in results["blur"]

    # BLUR's evaluated model is its base model here: recall 1 wherever a reference holds a word, else left out (NaN)
    refs = json.loads((tmp_path / "refs" / "blur_references.json").read_text())["answers"]
    for task in GROUPS["blur"]:
        for config, name in ((f"{task[5:]}_{variant}", s) for s, variant in SETS.items()):
            if config in refs:
                worded = any(re.search(r"\w", r["answer"]) for r in refs[config])
                value = results[task][f"{name}_rougeL_recall,none"]
                assert value == pytest.approx(1.0) if worded else math.isnan(value), (task, name, value)

    # `unlearn report`: every task metric, its direction the one the task declares to lm-eval
    assert main(["report", str(tmp_path / "out"), "--json", str(tmp_path / "report.json")]) == 0
    report = next(iter(json.loads((tmp_path / "report.json").read_text()).values()))
    shown = 0
    for task in (t for tasks in GROUPS.values() for t in tasks if t != "mmlu"):
        assert set(report[task]) == set(res["higher_is_better"][task]), task
        for metric, higher in res["higher_is_better"][task].items():
            assert (metric not in benchmark_of_task(task).lower_is_better) == higher, (task, metric)
            shown += 1
    assert shown == 5 * 4 + 2 + 4 * 4 + 2 * 5 + 3 + 3 + 2 + 1 and set(report["lume"]) == set(expected)

    # `unlearn ci` on the same folder: a check on each group, DUSK's privleak (ideal 0) through abs()
    suite = tmp_path / "suite.yaml"
    suite.write_text("tasks: [dusk, lume, knowundo, blur]\nchecks:\n"
                     "  - abs(dusk_privacy/privleak) <= 100\n  - dusk_privacy/retain_deviation <= 100\n"
                     "  - lume/final_score >= 0\n  - knowundo_privacy/unlearn_success >= 0\n")
    capsys.readouterr()
    assert main(["ci", "--suite", str(suite), "--out", str(tmp_path / "ci"), "--from-results",
                 str(tmp_path / "out")]) == 0, capsys.readouterr()
    checks = json.loads((tmp_path / "ci" / "results.json").read_text())["checks"]
    assert len(checks) == 4 and all(c["passed"] for c in checks)
    # a NaN (here BLUR's, every reference of the tiny model wordless) fails, and the message does not blame a
    # reference run alone
    nan_task = next((t for t in GROUPS["blur"] if math.isnan(results[t]["combined_rougeL_recall,none"])), None)
    if nan_task is not None:
        suite.write_text(f"tasks: [blur]\nchecks:\n  - {nan_task}/combined_rougeL_recall >= 0\n")
        assert main(["ci", "--suite", str(suite), "--out", str(tmp_path / "ci2"), "--from-results",
                     str(tmp_path / "out")]) == 1
        message = json.loads((tmp_path / "ci2" / "results.json").read_text())["checks"][0]["message"]
        assert "the value is NaN (not computed: the results' warnings say why" in message


def test_a_missing_data_folder_names_the_dataset_it_was_for(tmp_path):
    """Four benchmarks read the same ``data_dir`` key beside their own: the error says which copy is missing."""
    from unlearn_tasks.dataset_loader import DataError
    from unlearn_tasks.knowundo.data import load_pairs

    with pytest.raises(DataError, match=r"^data_dir \S+/nowhere \(the local copy of zjunlp/KnowUnDo; or its "
                       r"benchmark's own \*_data_dir\) does not exist"):
        load_pairs("privacy", "unlearn", "val", "zjunlp/KnowUnDo", str(tmp_path / "nowhere"))


def test_the_readmes_unlearn_commands_have_their_flags_and_the_required_ones():
    """Each ``unlearn`` command of the four READMEs' indented code blocks (continuations joined) names only flags its
    subcommand has, and every flag it requires (``unlearn run`` without ``--out`` fails as written)."""
    import argparse

    from harness_ext import tasks_dir
    from unlearn_app.cli import build_parser
    from unlearn_methods.config import option_name, run_fields

    run_required = {option_name(f) for f in run_fields() if f.metadata["required"]}  # checked after parsing

    def subparsers(parser):
        return next((a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})

    bad, seen = [], 0
    for bench in GROUPS:
        text = re.sub(r"\\\n\s*", " ", (tasks_dir() / bench / "README.md").read_text())
        for line in re.findall(r"^ {4}(unlearn .*)$", text, flags=re.M):
            words, command = line.split("#")[0].split()[1:], build_parser()
            while words and words[0] in subparsers(command):
                command = subparsers(command)[words.pop(0)]
            flags = {w.split("=")[0] for w in words if w.startswith("--")}
            required = {a.option_strings[0] for a in command._actions if a.required and a.option_strings}
            required |= run_required if command.prog.endswith("unlearn run") else set()
            bad += [f"{bench}: {line}: {f} unknown" for f in flags - set(command._option_string_actions)]
            bad += [f"{bench}: {line}: {f} missing" for f in required - flags]
            seen += 1
    assert seen >= 7 and not bad, bad
