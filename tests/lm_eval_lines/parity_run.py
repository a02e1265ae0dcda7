"""Run a fixed set of our tasks on the tiny model under whichever lm-eval this interpreter has, and write what they
gave: ``OUT/numbers.json`` (the lm-eval version, every task's metrics and every document's logged values, read back
from the files lm-eval wrote) and each run's lm-eval output folder (``OUT/<run>/``: results and samples files, as
``lm_eval --log_samples`` writes them). The ``tofu`` run is the bare ``lm_eval`` command (it must find our task
through the autoload hook, in lm-eval's whole index); the others go through :func:`harness_ext.evaluate.run_lm_eval`.

``python tests/lm_eval_lines/parity_run.py OUT MODEL_DIR DATA_ROOT [RUN ...]`` (DATA_ROOT as
``parity_run.py --write-data DATA_ROOT`` and ``--write-waterdrum DATA_ROOT MODEL_DIR`` write it; the runs of
:data:`RUNS` named, default all). The test in this folder runs it under lm-eval 0.4.13 and under 0.5 and compares the two
``numbers.json`` (tests/lm_eval_lines/test_both_lines.py).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

#: run name -> (tasks, metadata beyond the data folder, which data folder, limit). Small enough for a loaded
#: 2-core machine; every task that one of lm-eval's lines could compute differently is here (see the test).
LEAK = {"leak_n": 6, "leak_k": [1, 3, 6], "leak_criterion": "rougeL_recall", "leak_max_new_tokens": 24}
LUME = {"lume_max_tokens": 2, "max_items_per_split": 2}
RUNS: dict[str, tuple[list[str], dict, str, int | None]] = {
    # whole evaluations of fewer documents (max_items_per_split), not lm_eval --limit: the board refuses a partial
    # evaluation, and test_both_lines submits these runs
    "tofu": (["tofu_forget10"], {"max_items_per_split": 3}, "tofu", None),
    "formats": (["tofu_mcqa", "tofu_cloze", "tofu_comprehension_qa"], {}, "relu", None),
    "leak": (["tofu_forget01_leak"], {**LEAK, "max_items_per_split": 6}, "tofu", None),
    "muse": (["muse_news_verbmem", "muse_news_knowmem"],
             {"verbmem_max_tokens": 8, "knowmem_max_tokens": 8, "max_items_per_split": 4}, "muse", None),
    "margins": (["margins_tofu_forget01"], {"max_items_per_split": 4}, "tofu", None),
    # LUME (SemEval-2025 Task 4) as its group, with its aggregate scores (harness_ext.group_scores) over its tasks
    # and a small MMLU (its YAML folder is the data folder's mmlu/)
    "lume": (["lume"], LUME, "lume", None),
    # CLEAR on lm-eval's hf-multimodal backend (its tiny LLaVA: DATA_ROOT/llava), images in the requests
    "clear": (["clear_forget10_image"], {"max_items_per_split": 2}, "clear", None),
    # MLLMU-Bench through its group (image and text tasks; 0.5 names their files mllmu_forget10::...), same LLaVA
    "mllmu": (["mllmu_forget10"], {"max_items_per_split": 1, "mode": "clean"}, "mllmu", None),
    # KnowUnDo through its group: its own request type (per-token log-probabilities and argmax matches)
    "knowundo": (["knowundo"], {}, "knowundo", None),
    # WaterDrum through its group: sampled generations verified against the owners' watermarks, on the tiny model
    # trained on watermarked data (DATA_ROOT/waterdrum: tests/fixtures/waterdrum.py)
    "waterdrum": (["waterdrum"], {}, "waterdrum", None),
}
#: The tasks and groups whose numbers are compared (a group's tasks are read from the results too).
GROUP_TASKS = {"lume": ["lume", "lume_task1", "lume_task2", "lume_task3", "lume_mia", "mmlu"],
               "mllmu": ["mllmu_forget10_image", "mllmu_forget10_text"],
               "knowundo": ["knowundo_copyright", "knowundo_privacy"], "waterdrum": ["waterdrum_ax", "waterdrum_tofu"]}
#: The data folders of DATA_ROOT.
DATA = ("tofu", "relu", "muse", "lume", "clear", "mllmu", "knowundo", "waterdrum")


def write_data(root: Path) -> None:
    """The data folders of :data:`RUNS` under ``root`` (the test's fixtures' writers) but WaterDrum's."""
    from fixtures.knowundo import write_knowundo_corpus
    from fixtures.lume import write_lume_corpus, write_mmlu_fixture
    from fixtures.muse import write_muse_corpus
    from fixtures.tofu_formats import write_fixture
    from unlearn_methods.scaffolding.clear_corpus import corpus_texts, write_clear_layout
    from unlearn_methods.scaffolding.mllmu_corpus import write_mllmu_layout
    from unlearn_methods.scaffolding.tiny_vlm import build_tiny_llava
    from unlearn_methods.scaffolding.tofu_corpus import write_corpus

    write_mmlu_fixture(root / "lume" / "mmlu")
    build_tiny_llava(corpus_texts(), root / "llava", seed=0)
    write_corpus(root / "tofu")
    write_fixture(root / "relu")
    write_muse_corpus(root / "muse")
    write_lume_corpus(root / "lume")
    write_clear_layout(root / "clear", n_people=20, poses=2)
    write_mllmu_layout(root / "mllmu", n_people=40)
    write_knowundo_corpus(root / "knowundo")


def write_waterdrum(root: Path, model_dir: Path) -> None:
    """WaterDrum's data folder under ``root``: the fixture's texts watermarked with ``model_dir`` (the tiny model) as
    paraphraser and a tiny model trained on them (tests/fixtures/waterdrum.py), apart from :func:`write_data` so that
    the two can be written side by side (the training takes most of it)."""
    from fixtures import waterdrum

    with waterdrum.one_thread():
        waterdrum.write(root / "waterdrum", model_dir)


def _plain(value):
    """A logged value as JSON keeps it (tuples as lists, NaN as the string 'nan')."""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


#: The run made with the bare ``lm_eval`` command.
CLI_RUN = "tofu"


def _bare_lm_eval(out: Path, model_dir: str, tasks: list[str], metadata: dict, limit: int | None) -> None:
    out.mkdir(parents=True)
    cmd = [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={model_dir},dtype=float32",
           "--device", "cpu", "--batch_size", "8", "--tasks", ",".join(tasks), "--metadata", json.dumps(metadata),
           "--output_path", str(out), "--log_samples", *(["--limit", str(limit)] if limit else [])]
    done = subprocess.run(cmd, cwd=out, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"lm_eval failed ({done.returncode}):\n{done.stderr[-4000:]}")


def _with_folder(model_dir: str, tasks: list[str], out: Path, metadata: dict, folder: Path) -> None:
    """Like :func:`harness_ext.evaluate.run_lm_eval`, with one more task folder on the index."""
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    from harness_ext import tasks_dir
    from harness_ext.evaluate import save_results

    tracker = EvaluationTracker(output_path=str(out))
    tm = TaskManager(include_path=[str(tasks_dir()), str(folder)], include_defaults=False,
                     metadata={"pretrained": model_dir, **metadata})
    res = simple_evaluate(model="hf", model_args=f"pretrained={model_dir},dtype=float32", tasks=tasks,
                          task_manager=tm, device="cpu", batch_size=8, bootstrap_iters=0, log_samples=True,
                          evaluation_tracker=tracker)
    save_results(tracker, res)


def main(out: Path, model_dir: str, data: dict[str, str], runs: list[str]) -> None:
    from importlib.metadata import version

    from harness_ext.evaluate import run_lm_eval
    from harness_ext.results import latest_results_file, read_results_file, samples_files
    from unlearn_app.leaderboard.recompute import parse_samples

    numbers: dict = {"lm_eval": version("lm_eval"), "results": {}, "samples": {}}
    for run in runs:
        started = time.monotonic()
        tasks, meta, data_key, limit = RUNS[run]
        metadata = {"data_dir": data[data_key], **meta}
        if run == CLI_RUN:
            _bare_lm_eval(out / run, model_dir, tasks, metadata, limit)
        elif run == "lume":
            _with_folder(model_dir, tasks, out / run, metadata, Path(data[data_key]) / "mmlu")
        elif run == "clear":
            run_lm_eval(Path(data[data_key]).parent / "llava", tasks, out / run, metadata, backend="hf-multimodal",
                        batch_size=4, device="cpu", gen_kwargs="max_gen_toks=6", log_samples=True)
        elif run == "mllmu":  # its few-shot prompts outgrow the tiny LLaVA's 512 positions (as in its slow test)
            run_lm_eval(Path(data[data_key]).parent / "llava", tasks, out / run, metadata, backend="hf-multimodal",
                        batch_size=4, device="cpu", gen_kwargs="max_gen_toks=4", log_samples=True,
                        extra_model_args={"dtype": "float32", "max_length": 1024})
        elif run == "waterdrum":  # the fixture's options (4 owners, 3 generations, 16-token prompts) and model
            from fixtures.waterdrum import metadata as waterdrum_options

            folder = Path(data[data_key])
            run_lm_eval(folder / "trained_model", tasks, out / run, waterdrum_options(folder / "data",
                        folder / "trained_model"), batch_size=16, device="cpu", gen_kwargs="max_gen_toks=32",
                        extra_model_args={"dtype": "float32"}, log_samples=True)
        else:
            run_lm_eval(model_dir, tasks, out / run, metadata, batch_size=8, device="cpu", limit=limit,
                        extra_model_args={"dtype": "float32"}, log_samples=True)
        results_file = latest_results_file(out / run)
        results = read_results_file(results_file)["results"]  # lm-eval 0.5's group::task names plain
        for task in GROUP_TASKS.get(run, tasks):
            numbers["results"][task] = {k.split(",")[0]: _plain(v) for k, v in results[task].items()
                                        if "," in k and "_stderr," not in k}
            for samples in samples_files(results_file, task):  # a group has none
                numbers["samples"][task] = {str(s["doc_id"]): {m: _plain(s.get(m)) for m in s["metrics"]}
                                            for s in parse_samples(samples.read_bytes(), samples.name)}
        print(f"parity_run: {run} {time.monotonic() - started:.1f} s", flush=True)
    (out / "numbers.json").write_text(json.dumps(numbers, indent=1, sort_keys=True))


if __name__ == "__main__":
    if sys.argv[1] == "--write-data":  # python parity_run.py --write-data ROOT
        write_data(Path(sys.argv[2]))
        sys.exit(0)
    if sys.argv[1] == "--write-waterdrum":  # python parity_run.py --write-waterdrum ROOT MODEL_DIR
        write_waterdrum(Path(sys.argv[2]), Path(sys.argv[3]))
        sys.exit(0)
    target, model, data_root, *names = sys.argv[1:]
    main(Path(target), model, {k: str(Path(data_root) / k) for k in DATA}, names or list(RUNS))
