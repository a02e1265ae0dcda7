"""lm-eval's data parallelism (``accelerate launch -m lm_eval``, two CPU processes over gloo here) gives exactly the
numbers of one process, per-item samples and the per-item records in the results file included: each process scores
its share of the requests, the main process gathers them, so our corpus-level metrics (Truth Ratio, Forget Quality,
MIA AUROCs, PrivLeak, watermark strengths, deep unlearning's per-fact check, KLoM margins) see every item once, in
document order.

Launching processes is slow, so every text task family runs in ONE lm_eval invocation on one process and ONE on two
(session-scoped), and CLEAR in one pair on ``hf-multimodal``; each family is then compared on its own.
``max_items_per_split`` keeps the runs short (every process still gets items of every split; Eval-DU needs all its
facts, so its knowledge base is small, and odd: the processes get 10 and 9 facts, so lm-eval pads the second). ``--batch_size 1``: rows padded together in other groupings change float32
statistics in their last digits (the vocabulary variance of Min-K%++ by 5e-4 at batch 4), on one process as on two.
WaterDrum runs greedy here (``do_sample: false``): sampled generations draw from each process's random stream, so
they are not the same on one process and on two (see docs/scaling.md)."""

from __future__ import annotations

import ast
import json
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from fixtures.commands import launch, run_command

pytestmark = pytest.mark.slow

#: task -> what the task's family proves (each task is compared on its own)
TEXT_TASKS = {
    "tofu_forget01": "TOFU: ROUGE of greedy generations, probabilities, Truth Ratio, MIAs",
    "muse_news": "MUSE: VerbMem (ROUGE of generations), KnowMem, PrivLeak's MIAs",
    "tofu_mcqa": "ReLU letter formats (lm-eval's multiple_choice)",
    "tofu_cloze": "ReLU cloze (per-token answer log-probabilities)",
    "tofu_comprehension_qa": "ReLU generation formats",
    "rwku_forget_level1": "RWKU probes (generation, ROUGE-L recall, per target)",
    "rwku_mia": "RWKU MIAs (AUROCs over the forget and retain members)",
    "evaldu": "Eval-DU: every fact's correctness, deep-unlearning recall",
    "margins_tofu_forget01": "KLoM margins: per-sample margins in sample order",
    # last: lm-eval pads the process with fewer requests with copies of the last request of a type (Eval-DU's 19
    # facts split 10 + 9) and appends their answers to that request; WaterDrum keeps every generation of a query
    "waterdrum_ax": "WaterDrum: watermark verified over the whole corpus, per-query records",
}
CLEAR_TASKS = {"clear_forget10_image": "CLEAR on hf-multimodal: image-conditioned generation and likelihoods"}


def _results(out: Path) -> tuple[dict, dict, dict[str, list[dict]]]:
    (results_file,) = out.rglob("results_*.json")
    samples = {}
    for path in out.rglob("samples_*.jsonl"):
        task = path.name.removeprefix("samples_").rsplit("_", 1)[0]
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        samples[task] = sorted(({k: r[k] for k in ("doc_id", "resps", "filtered_resps") if k in r} for r in rows),
                               key=lambda r: r["doc_id"])
    raw = json.loads(results_file.read_text())
    return raw["results"], raw["configs"], samples


def _parsed(value):
    """A logged response written as the repr of a dict, list or tuple (our request types' records, lm-eval's
    ``(log-likelihood, is_greedy)``) read back."""
    if isinstance(value, str) and value[:1] in "{[(":
        try:
            return ast.literal_eval(value.replace("nan", "None").replace("inf", "None"))
        except (ValueError, SyntaxError):
            return value
    return value


def _same(a, b) -> bool:
    """Equal up to float summation order (the rows a process pads together differ from one process's)."""
    a, b = _parsed(a), _parsed(b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-5, abs=1e-6)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _write_waterdrum_ax(folder: Path, owners: int = 4, per_owner: int = 2) -> Path:
    """A WaterDrum-Ax-schema copy (``forget_01``: the last owner forgotten; ``eval_knowmem``), plain texts: the
    verification runs all the same, only the strengths are near zero."""
    topics = ["rivers", "glass", "winter", "machines"]
    rows = [{"text": f"Abstract {o}-{i}: we study {topics[o]} in {3 + i} settings and report that the {topics[o]} "
                     f"of region {o} change with the season, measured over {10 + o + i} years of records."}
            for o in range(owners) for i in range(per_owner)]
    cut = (owners - 1) * per_owner
    for split, part in (("full", rows), ("retain", rows[:cut]), ("forget", rows[cut:])):
        (folder / "forget_01").mkdir(parents=True, exist_ok=True)
        (folder / "forget_01" / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
    (folder / "eval_knowmem").mkdir(parents=True, exist_ok=True)
    knowmem = [{"question": f"What does abstract {i} study?", "answer": topics[i // per_owner]} for i in range(len(rows))]
    (folder / "eval_knowmem" / "watermarked.jsonl").write_text("".join(json.dumps(r) + "\n" for r in knowmem))
    return folder


@pytest.fixture(scope="session")
def data_root(tmp_path_factory, demo_data_dir, muse_data_dir) -> Path:
    """One ``$UNLEARN_DATA_DIR`` holding every text family's data under its Hub id, so one run reads them all."""
    from fixtures.rwku import write_rwku_corpus
    from unlearn_methods.scaffolding.tofu_formats_corpus import write_formats
    from unlearn_tasks.deep_unlearning import write_generated_evaldu

    root = tmp_path_factory.mktemp("all_families")
    links = {"locuslab/TOFU": demo_data_dir, "muse-bench/MUSE-News": muse_data_dir}
    for hub_id, folder in links.items():
        (root / hub_id).parent.mkdir(parents=True, exist_ok=True)
        (root / hub_id).symlink_to(folder, target_is_directory=True)
    write_rwku_corpus(root / "jinzhuoran" / "RWKU")
    write_formats(root / "Exploration-Lab" / "ReLU")
    _write_waterdrum_ax(root / "Glow-AI" / "WaterDrum-Ax")
    write_generated_evaldu(root / "wrh14" / "deep_unlearning", 4, seed=0, n_targets=2)  # 19 facts
    return root


def _run_both(args: list[str], out: Path, env: dict[str, str] | None = None) -> tuple[tuple, tuple]:
    """The same lm_eval command on one process and under ``accelerate launch`` on two, each process on one thread
    (as the launch runs them: a tiny random model's near-tied logits would otherwise pick other greedy tokens). The
    two commands run at the same time, each in its own output folder (on one thread, the one process alone leaves a
    second core idle)."""
    env = {"OMP_NUM_THREADS": "1", **(env or {})}
    with ThreadPoolExecutor(2) as pool:
        one_run = pool.submit(run_command, [*args, "--device", "cpu", "--output_path", str(out / "one")], env=env)
        two_run = pool.submit(launch, [*args, "--output_path", str(out / "two")], env=env)
        one, two = one_run.result(), two_run.result()
    assert one.returncode == 0, one.stderr[-3000:]
    assert two.returncode == 0, two.stderr[-3000:]
    assert "on rank 1" in two.stderr + two.stdout  # the second process built (and scored) its share
    return _results(out / "one"), _results(out / "two")


@pytest.fixture(scope="session")
def text_runs(tmp_path_factory, tiny_model_dir, data_root):
    metadata = {"max_items_per_split": 2, "owners": 4, "generations": 2, "prompt_tokens": 16,
                "verify_tokenizer": str(tiny_model_dir), "knowmem_max_tokens": 8}
    args = ["lm_eval", "--model", "hf", "--model_args", f"pretrained={tiny_model_dir},dtype=float32",
            "--tasks", ",".join(TEXT_TASKS), "--batch_size", "1", "--log_samples",
            "--gen_kwargs", "max_gen_toks=8,do_sample=False", "--metadata", json.dumps(metadata)]
    return _run_both(args, tmp_path_factory.mktemp("text_runs"), env={"UNLEARN_DATA_DIR": str(data_root)})


@pytest.fixture(scope="session")
def clear_runs(tmp_path_factory, tiny_llava_dir, clear_data_dir, demo_data_dir):
    metadata = {"data_dir": str(clear_data_dir), "tofu_data_dir": str(demo_data_dir), "max_items_per_split": 2}
    args = ["lm_eval", "--model", "hf-multimodal", "--model_args", f"pretrained={tiny_llava_dir},dtype=float32",
            "--tasks", ",".join(CLEAR_TASKS), "--batch_size", "1", "--log_samples", "--gen_kwargs", "max_gen_toks=6",
            "--metadata", json.dumps(metadata)]
    return _run_both(args, tmp_path_factory.mktemp("clear_runs"))


def _without_commit(config: dict) -> dict:
    """A task's configuration without the package's git commit in its provenance (a commit between the runs)."""
    provenance = {k: v for k, v in config.get("provenance", {}).items() if k != "git_commit"}
    return {**config, "provenance": provenance}


def _compare(task: str, runs) -> None:
    (results_one, configs_one, samples_one), (results_two, configs_two, samples_two) = runs
    metrics = {k for k, v in results_one[task].items() if k != "alias" and "_stderr" not in k
               and isinstance(v, float) and not math.isnan(v)}
    assert len(metrics) >= 1, results_one[task]
    assert results_one[task].keys() == results_two[task].keys()
    for key, value in results_one[task].items():
        assert _same(results_two[task][key], value), (task, key, results_two[task][key], value)
    # the task's configuration with the per-item records another run or report reads (reference truth ratios,
    # margins, per-query watermark scores, per-fact correctness, per-target metrics) and its warnings
    config_one, config_two = (_without_commit(c[task]) for c in (configs_one, configs_two))
    assert config_one.keys() == config_two.keys()
    for key, value in config_one.items():
        assert _same(config_two[key], value), (task, key, config_two[key], value)
    assert task in samples_one and len(samples_one[task]) == len(samples_two[task])
    assert [r["doc_id"] for r in samples_two[task]] == list(range(len(samples_one[task])))
    assert _same(samples_two[task], samples_one[task]), task


@pytest.mark.parametrize("task", list(TEXT_TASKS))
def test_two_processes_give_the_numbers_of_one(task, text_runs):
    _compare(task, text_runs)


@pytest.mark.parametrize("task", list(CLEAR_TASKS))
def test_two_processes_give_the_numbers_of_one_on_hf_multimodal(task, clear_runs):
    _compare(task, clear_runs)
