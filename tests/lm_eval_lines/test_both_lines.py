"""The same tasks give the same numbers on lm-eval 0.4.13 and on lm-eval 0.5, and what reads lm-eval's output reads
both lines' files.

Both lines run in this test, side by side, from one tiny model and one set of data folders: this interpreter's
lm-eval and the one of ``UNLEARN_OTHER_LM_EVAL_PYTHON`` (a Python whose lm-eval is the other line, with this
checkout's packages) each run ``parity_run.py`` (the bare ``lm_eval`` command for TOFU forget10, then the ReLU
formats, TOFU Leak@k, MUSE, margins, LUME (SemEval-2025) with its group scores, CLEAR and MLLMU-Bench on
``hf-multimodal``, KnowUnDo and WaterDrum), and every metric and every document's logged value of one is compared
with the other's.
No number is written here: each line's are checked against the other's. CI's lm-eval 0.5 stage runs this folder
in its 0.5 venv with the main venv's Python as the other line (.ci/lmeval05_stage.sh); without the variable the
comparison is skipped (the main suite has only one lm-eval).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness_ext.lm_eval_version import LM_EVAL_05

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
OTHER = "UNLEARN_OTHER_LM_EVAL_PYTHON"


def _lm_eval_line(python: str) -> str:
    done = subprocess.run([python, "-c", "from importlib.metadata import version; print(version('lm_eval'))"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.fixture(scope="module")
def lines(tmp_path_factory) -> dict[str, Path]:
    """``{"0.4": output folder, "0.5": output folder}`` of ``parity_run.py`` under both lm-eval lines."""
    other = os.environ.get(OTHER)
    if not other:
        pytest.skip(f"{OTHER} is not set: the comparison needs a Python with the other lm-eval line "
                    "(CI's lm-eval 0.5 stage sets it)")
    from unlearn_methods.scaffolding.tiny_model import build_tiny_model
    from unlearn_methods.scaffolding.tofu_corpus import tokenizer_texts

    root = tmp_path_factory.mktemp("lm_eval_lines")
    model = root / "model"
    build_tiny_model(tokenizer_texts(0), model, seed=0)
    writers = [subprocess.Popen([sys.executable, str(HERE / "parity_run.py"), what, str(root / "data"), str(model)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})
               for what in ("--write-data", "--write-waterdrum")]  # side by side, one thread each
    for writer in writers:
        log = writer.communicate(timeout=600)[0]
        assert writer.returncode == 0, log[-2000:]
    data = [str(root / "data")]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])}
    this, that = "0.5" if LM_EVAL_05 else "0.4", "0.4" if LM_EVAL_05 else "0.5"
    assert _lm_eval_line(other).startswith(that), f"{OTHER}={other} has lm-eval {_lm_eval_line(other)}, not {that}"
    runs = {line: (python, root / f"out-{line}") for line, python in ((this, sys.executable), (that, other))}
    procs = {line: subprocess.Popen([python, str(HERE / "parity_run.py"), str(out), str(model), *data], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for line, (python, out) in runs.items()}  # both lines at once, one thread each
    for line, proc in procs.items():
        log = proc.communicate(timeout=900)[0]
        assert proc.returncode == 0, f"lm-eval {line}:\n{log[-4000:]}"
    return {line: out for line, (_, out) in runs.items()}


def _numbers(lines: dict[str, Path]) -> tuple[dict, dict]:
    old, new = (json.loads((lines[line] / "numbers.json").read_text()) for line in ("0.4", "0.5"))
    assert old["lm_eval"].startswith("0.4.") and new["lm_eval"].startswith("0.5."), (old["lm_eval"], new["lm_eval"])
    return old, new


def _same(a, b) -> bool:
    """Equal to float tolerance, through lists and dicts ('nan' logged as a string is equal to itself)."""
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        if isinstance(a, dict) and isinstance(b, dict):
            return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
        if isinstance(a, list) and isinstance(b, list):
            return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
        return a == b
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def test_same_numbers_on_both_lines(lines):
    old, new = _numbers(lines)
    assert sorted(old["results"]) == sorted(new["results"]) == sorted([
        "tofu_forget10", "tofu_cloze", "tofu_comprehension_qa", "tofu_mcqa", "tofu_forget01_leak", "muse_news_verbmem",
        "muse_news_knowmem", "margins_tofu_forget01", "lume", "lume_task1", "lume_task2", "lume_task3", "lume_mia",
        "mmlu", "clear_forget10_image", "mllmu_forget10_image", "mllmu_forget10_text", "knowundo_copyright",
        "knowundo_privacy", "waterdrum_ax", "waterdrum_tofu"])
    for task in old["results"]:
        assert old["results"][task].keys() == new["results"][task].keys(), task
        differ = {m: (v, new["results"][task][m]) for m, v in old["results"][task].items()
                  if not _same(v, new["results"][task][m])}
        assert not differ, f"{task}: 0.4.13 vs 0.5: {differ}"
        if task not in old["samples"]:  # a group: no samples of its own
            assert task not in new["samples"] and task in ("lume", "mmlu"), task
            continue
        assert old["samples"][task].keys() == new["samples"][task].keys(), task
        docs = [d for d in old["samples"][task] if not _same(old["samples"][task][d], new["samples"][task][d])]
        assert not docs, f"{task}: documents logged differently: {docs[:5]}"
    # the comparison has something to compare: numbers that a wrong request, response or estimator would move
    leak = new["results"]["tofu_forget01_leak"]
    assert 0 < leak["leak_at_1"] < leak["leak_at_3"] < leak["leak_at_6"] <= 1
    assert 0 < new["results"]["tofu_cloze"]["forget_prob"] < 1
    assert 0 < new["results"]["tofu_forget10"]["forget_truth_ratio"] and len(new["samples"]["tofu_forget10"]) == 15  # 3 of each of its 5 sets
    # LUME's group scores (harness_ext.group_scores, on both lines' group step) from its tasks and MMLU
    assert 0 < new["results"]["lume"]["final_score"] and new["results"]["lume"]["mmlu_acc"] == new["results"]["mmlu"]["acc"]
    # WaterDrum: the model trained on watermarked text carries its owners' watermark in its sampled generations
    # (verified on both lines' samples), far above the strength under the other owners' keys
    for task in ("waterdrum_ax", "waterdrum_tofu"):
        got = new["results"][task]
        assert got["forget_strength"] > 5 * abs(got["other_id_strength"]) > 0 and 0 < got["forget_rougeL_recall"] < 1
    assert 0 < new["results"]["knowundo_privacy"]["unlearn_success"] < 100  # per-token argmax matches of its answers
    # MLLMU-Bench: every set's classification, cloze and generation question (the tiny LLaVA's greedy answers are
    # the same ':' for any prompt, so its scores are 0: what is compared here is the run and its records)
    assert all(len(new["samples"][t]) == 12 for t in ("mllmu_forget10_image", "mllmu_forget10_text"))


def _data_root(out: Path) -> Path:
    """The data folder the :func:`lines` runs read (beside their output folders)."""
    return out.parent / "data"


def _waterdrum_recomputed(run: Path, tokenizer: Path) -> dict:
    """WaterDrum's metrics recomputed from a run's samples as ``leaderboard validate`` does, with ``tokenizer`` as
    the validator's verification tokenizer (``trusted``)."""
    from harness_ext.results import latest_results_file, read_results_file, samples_files
    from unlearn_app.leaderboard.recompute import parse_samples, recompute_run

    results_file = latest_results_file(run)
    tasks = ("waterdrum_ax", "waterdrum_tofu")
    samples = {t: parse_samples(samples_files(results_file, t)[0].read_bytes(), t) for t in tasks}
    done = recompute_run(read_results_file(results_file), samples,
                         trusted={t: {"verify_tokenizer": str(tokenizer)} for t in tasks})
    return {t: done[t] for t in tasks}


def test_each_lines_samples_are_read_by_submit_validate_judge_and_report(lines, tmp_path):
    from unlearn_app.judge.benchmarks import BENCHMARKS
    from unlearn_app.judge.inputs import read_generations
    from unlearn_app.leaderboard.submission import build, write
    from unlearn_app.leaderboard.validate import check_folder
    from unlearn_app.reports.evaluated_run import load_run

    old, _ = _numbers(lines)
    seen: dict[str, dict] = {}
    for line, out in lines.items():
        runs = [out / run for run in ("tofu", "formats", "leak", "muse", "margins", "lume", "clear", "mllmu",
                                      "knowundo", "waterdrum")]
        built = build(runs, model_id="org/model", revision="0" * 40, method="ga")  # unlearn submit
        check = check_folder(write(built, tmp_path / line))  # unlearn leaderboard validate
        assert check.ok, (line, check.errors)
        for task in ("tofu_mcqa", "tofu_cloze", "tofu_forget01_leak", "muse_news_verbmem", "margins_tofu_forget01",
                     "lume_task1", "lume", "clear_forget10_image", "mllmu_forget10_image", "mllmu_forget10_text",
                     "knowundo_copyright"):  # 0.5 logs a group's tasks as lume::lume_task1 ...
            assert check.recomputed[task], (line, task, check.unverified)
            for metric, value in check.recomputed[task].items():
                assert _same(value, old["results"][task][metric]), (line, task, metric)
        # WaterDrum's verification needs the validator's own tokenizer (never the submitter's): with it, every
        # metric from 0.5's samples (0.4.13's: tests/unlearn_app/test_recompute.py; 5 s a run here)
        assert set(check.unverified["waterdrum_ax"]) == set(old["results"]["waterdrum_ax"]), line
        if line == "0.5":
            waterdrum = _waterdrum_recomputed(out / "waterdrum", _data_root(out) / "waterdrum" / "trained_model")
            for task, values in waterdrum.items():
                assert not values.unverifiable and values.values.keys() == old["results"][task].keys(), task
                assert _same(values.values, old["results"][task]), task
        generations = read_generations(out / "tofu")  # unlearn judge
        # MLLMU-Bench's generations, run through its group: 0.5 names the files samples_mllmu_forget10::<task>_<date>
        mllmu = read_generations(out / "mllmu", BENCHMARKS["mllmu"])
        assert sorted(mllmu.items) == ["mllmu_forget10_image", "mllmu_forget10_text"], (line, mllmu.files)
        assert all(f.name.startswith("samples_mllmu_forget10::" if line == "0.5" else "samples_mllmu_forget10_")
                   for f in mllmu.files), (line, mllmu.files)
        report = load_run(out / "tofu")  # unlearn report
        seen[line] = {"recomputed": check.recomputed, "unverified": check.unverified,
                      "generations": [(i.split, i.index, i.question, i.answer)
                                      for items in generations.items.values() for i in items],
                      "mllmu": {task: [(i.split, i.index, i.question, i.ground_truth, i.answer) for i in items]
                                for task, items in mllmu.items.items()},
                      "report": {m: "nan" if isinstance(v, float) and math.isnan(v) else v
                                 for m, v in report.metrics["tofu_forget10"].items()}}
        assert seen[line]["generations"] and all(isinstance(g[3], str) for g in seen[line]["generations"])
        assert "forget_truth_ratio" in seen[line]["report"], line
        assert _same(seen[line]["report"], {m: old["results"]["tofu_forget10"][m] for m in seen[line]["report"]})
    assert _same(seen["0.4"], seen["0.5"])
