"""What an lm-eval run costs before its first request: a bare lm-eval, lm-eval with this package installed, our
tasks through ``lm_eval`` and through our own commands' Python path; each in a fresh process, CPU and wall seconds.

    PYTHONPATH=. python benchmarks/bench_startup.py [--repeats 5] [--whole] [--json FILE]

Scenarios (the tiny demo Llama and the demo TOFU corpus, written to a temporary folder; one torch thread):

* ``bare``: ``lm_eval --model hf --tasks startup_probe --include_path PROBE`` with ``UNLEARN_LMEVAL_AUTOLOAD=0``:
  lm-eval alone (``startup_probe``: a 4-question ``loglikelihood`` task on a local JSON-lines file).
* ``bare+ours``: the same with this package's start-up hook on: what installing this package adds to any run.
* ``ours-cli``: ``lm_eval --model hf --tasks tofu_forget10 --metadata '{"data_dir": ...}'``.
* ``ours-api``: ``harness_ext.evaluate.run_lm_eval`` (our commands' path: only our task folder indexed).
* ``open-unlearning`` (with ``--whole --open-unlearning CHECKOUT --venv DIR``): its ``src/eval.py
  experiment=eval/tofu/default`` (default metrics) on the same model and data, run as ``bench_tofu_eval.py`` runs it
  (whose venv it uses or builds); whole run only.

Each run is timed at its phases (from the process start; CPU = user + sys of the process, ``time.process_time``):
``start`` (interpreter, site packages, the ``.pth`` hook), ``index`` (``TaskManager.__init__``: lm-eval reading the
task YAMLs), ``model`` (``HFLM.__init__``), ``tasks`` (``TaskManager.load``: building the tasks, which imports their
code), ``first request`` (lm-eval's ``evaluate`` handing the first requests to the model; everything between the
phases is imports and lm-eval's own set-up). The process exits there, unless ``--whole``: then it runs to the end
and ``total`` is the whole run (CPU from the process's resource usage). Each scenario runs once untimed first (disk
caches), then ``--repeats`` times, interleaved; the table gives min and median.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PHASES = ("start", "index start", "index end", "model start", "model end", "tasks start", "tasks end",
          "first request")
#: lm-eval's own request types; ours are read from ``harness_ext.request_types`` when it was imported.
LM_EVAL_REQUESTS = ("loglikelihood", "loglikelihood_rolling", "generate_until")

PROBE_YAML = """task: startup_probe
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: loglikelihood
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: " {{{{answer}}}}"
metric_list:
  - metric: acc
"""

# ------------------------------------------------------------------------------------------------ the child
CHILD = r'''
import importlib.abc, importlib.machinery, json, os, sys, time
T0 = float(os.environ["BENCH_T0"])
OUT = os.environ["BENCH_OUT"]
WHOLE = os.environ.get("BENCH_WHOLE") == "1"
marks = {}

def mark(name):
    if name not in marks:
        marks[name] = (time.process_time(), time.time() - T0)

def dump():
    with open(OUT, "w") as f:
        json.dump(marks, f)

mark("start")

def timed(owner, attr, before, after=None):
    original = getattr(owner, attr)
    def wrapper(*args, **kwargs):
        mark(before)
        try:
            return original(*args, **kwargs)
        finally:
            if after:
                mark(after)
    setattr(owner, attr, wrapper)

def first_request(lm):
    names = list(REQUESTS)
    types = sys.modules.get("harness_ext.request_types")
    names += list(getattr(types, "REQUEST_TYPES", {}) or {})
    for name in names:
        method = getattr(lm, name, None)
        if method is None:
            continue
        def wrapper(*args, _method=method, **kwargs):
            mark("first request")
            if not WHOLE:
                dump()
                os._exit(0)
            return _method(*args, **kwargs)
        setattr(lm, name, wrapper)

def patch_manager(module):
    timed(module.TaskManager, "__init__", "index start", "index end")
    timed(module.TaskManager, "load", "tasks start", "tasks end")

def patch_hf(module):
    timed(module.HFLM, "__init__", "model start", "model end")

def patch_evaluator(module):
    original = module.evaluate
    def evaluate(*args, **kwargs):
        first_request(kwargs["lm"] if "lm" in kwargs else args[0])
        return original(*args, **kwargs)
    module.evaluate = evaluate

PATCHES = {"lm_eval.tasks.manager": patch_manager, "lm_eval.models.huggingface": patch_hf,
           "lm_eval.evaluator": patch_evaluator}

class Loader(importlib.abc.Loader):
    def __init__(self, wrapped, patch):
        self.wrapped, self.patch = wrapped, patch
    def create_module(self, spec):
        return self.wrapped.create_module(spec)
    def exec_module(self, module):
        self.wrapped.exec_module(module)
        self.patch(module)

class Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in PATCHES:
            return None
        for finder in sys.meta_path[sys.meta_path.index(self) + 1:]:  # the finders after this one (autoload's)
            spec = finder.find_spec(name, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = Loader(spec.loader, PATCHES[name])
                return spec
        return None

sys.meta_path.insert(0, Finder())
mode, args = sys.argv[1], json.loads(sys.argv[2])
if mode == "cli":
    sys.argv = ["lm_eval", *args]
    from lm_eval.__main__ import cli_evaluate
    cli_evaluate()
else:
    from harness_ext.evaluate import run_lm_eval
    run_lm_eval(**args)
dump()
'''


def _child_source() -> str:
    return CHILD.replace("REQUESTS", repr(LM_EVAL_REQUESTS))


# ----------------------------------------------------------------------------------------------- the parent
def scenarios(work: Path, model: str, data: str, probe: Path) -> dict[str, tuple[str, object, dict[str, str]]]:
    """name -> (mode, arguments, extra environment)."""
    common = ["--model", "hf", "--model_args", f"pretrained={model}", "--batch_size", "16", "--device", "cpu"]
    off = {"UNLEARN_LMEVAL_AUTOLOAD": "0"}
    return {
        "bare": ("cli", [*common, "--tasks", "startup_probe", "--include_path", str(probe)], off),
        "bare+ours": ("cli", [*common, "--tasks", "startup_probe", "--include_path", str(probe)], {}),
        "ours-cli": ("cli", [*common, "--tasks", "tofu_forget10", "--metadata", json.dumps({"data_dir": data})], {}),
        "ours-api": ("api", {"model_dir": model, "tasks": ["tofu_forget10"], "output_dir": str(work / "api_out"),
                             "metadata": {"data_dir": data}, "batch_size": 16, "device": "cpu"}, {}),
    }


def _tofu_eval_script():
    """benchmarks/bench_tofu_eval.py, for its way of running open-unlearning."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_tofu_eval", Path(__file__).with_name("bench_tofu_eval.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_open_unlearning(ou: tuple, work: Path) -> dict[str, list[float]]:
    """open-unlearning's evaluator, start to exit: ``total`` only (CPU filled in by the caller)."""
    script, python, checkout, model = ou
    out = work / "ou_out"
    start = time.perf_counter()
    script.run_ou(python, checkout, work / "ou", model, out, "forget10", 16, [])
    return {"total": [0.0, time.perf_counter() - start]}


def run_once(mode: str, args: object, extra_env: dict[str, str], whole: bool, work: Path) -> dict[str, list[float]]:
    """One fresh process; its phase marks as name -> [cpu, wall], plus ``total`` (whole runs)."""
    if mode == "ou":
        return run_open_unlearning(args, work)  # type: ignore[arg-type]
    out = work / "marks.json"
    out.unlink(missing_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HOME": str(work / "hf_home"),
           "BENCH_OUT": str(out), "BENCH_WHOLE": "1" if whole else "0", **extra_env}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["BENCH_T0"] = repr(time.time())
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _child_source(), mode, json.dumps(args)], cwd=work, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate()
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0 or not out.exists():
        sys.exit(f"{mode} {args} failed (exit {proc.returncode}):\n{err[-3000:]}")
    marks = json.loads(out.read_text())
    marks["total"] = [usage.ru_utime + usage.ru_stime, wall]  # cumulative over children: differenced by the caller
    return marks


def write_inputs(work: Path) -> tuple[str, str, Path]:
    """The tiny demo Llama, the demo TOFU corpus and the probe task, under ``work``."""
    from harness_ext.quiet import silence

    silence()  # before transformers imports torchao
    from unlearn_methods.scaffolding.tiny_model import build_tiny_model
    from unlearn_methods.scaffolding.tofu_corpus import tokenizer_texts, write_corpus

    model = work / "tiny"
    build_tiny_model(tokenizer_texts(), model, seed=0)
    data = write_corpus(work / "data")
    probe = work / "probe"
    probe.mkdir()
    rows = [{"question": f"What is {a} plus {b}?", "answer": str(a + b)} for a, b in ((1, 2), (3, 4), (5, 6), (7, 8))]
    (probe / "probe.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (probe / "startup_probe.yaml").write_text(PROBE_YAML.format(data=probe / "probe.jsonl"))
    return str(model), str(data), probe


def phase_seconds(marks: dict[str, list[float]], k: int, whole: bool = False) -> dict[str, float]:
    """The seconds of each phase (``k`` = 0: CPU, 1: wall) from the marks; ``whole``: with the whole run's."""
    get = {name: m[k] for name, m in marks.items()}
    if "start" not in get:  # open-unlearning: the whole run only
        return {"whole run": get["total"]}
    parts = {"start": get["start"]}
    if "index start" in get:
        parts["index (TaskManager)"] = get["index end"] - get["index start"]
    if "model start" in get:
        parts["model load (HFLM)"] = get["model end"] - get["model start"]
    if "tasks start" in get:
        parts["task build (TaskManager.load)"] = get["tasks end"] - get["tasks start"]
    end = get.get("first request", get.get("total"))
    parts["imports and the rest"] = end - sum(parts.values())
    parts["to first request"] = end
    if whole:
        parts["whole run"] = get["total"]
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="Timed runs per scenario (interleaved; default 5).")
    parser.add_argument("--whole", action="store_true", help="Run each evaluation to the end (total = whole run).")
    parser.add_argument("--only", default=None, help="Comma-separated scenarios (default: all).")
    parser.add_argument("--json", default=None, help="Write every run's marks to this file.")
    parser.add_argument("--open-unlearning", default=None, metavar="CHECKOUT",
                        help="With --whole: also run open-unlearning's TOFU evaluator from this checkout.")
    parser.add_argument("--venv", default=None, help="open-unlearning's venv (bench_tofu_eval.py builds it if absent).")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats {args.repeats}: give 1 or more.")
    if args.open_unlearning and not (args.whole and args.venv):
        parser.error("--open-unlearning needs --whole and --venv DIR.")
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model, data, probe = write_inputs(work)
        table = scenarios(work, model, data, probe)
        if args.open_unlearning:
            script = _tofu_eval_script()
            checkout = Path(args.open_unlearning).resolve()
            python = script.ou_venv(checkout, Path(args.venv).resolve())
            script.ou_data(Path(data), work / "ou")
            table["open-unlearning"] = ("ou", (script, python, checkout, model), {})
        names = args.only.split(",") if args.only else list(table)
        unknown = [n for n in names if n not in table]
        if unknown:
            parser.error(f"--only {','.join(unknown)}: give some of {', '.join(table)}.")
        runs: dict[str, list[dict]] = {n: [] for n in names}
        previous = resource.getrusage(resource.RUSAGE_CHILDREN)
        for repeat in range(args.repeats + 1):
            for name in names:
                marks = run_once(*table[name], args.whole, work)
                now = resource.getrusage(resource.RUSAGE_CHILDREN)
                marks["total"][0] = (now.ru_utime + now.ru_stime) - (previous.ru_utime + previous.ru_stime)
                previous = now
                if repeat:  # the first round warms the disk caches
                    runs[name].append(marks)
                    seconds = phase_seconds(marks, 0, args.whole)
                    print(f"  {name} #{repeat}: " + ", ".join(f"{part} {seconds[part]:.2f} s CPU" for part in
                          ("to first request", "whole run") if part in seconds), flush=True)
    print(f"done {time.strftime('%H:%M:%S UTC', time.gmtime())}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for k, unit in ((0, "CPU seconds (user+sys)"), (1, "wall seconds")):
        print(f"\n{unit}, min / median of {args.repeats}:")
        rows = {}
        for name in names:
            per_run = [phase_seconds(m, k, args.whole) for m in runs[name]]
            for part in per_run[0]:
                values = [p[part] for p in per_run if part in p]
                rows.setdefault(part, {})[name] = f"{min(values):.2f} / {statistics.median(values):.2f}"
        print("| phase | " + " | ".join(names) + " |")
        print("|---|" + "---:|" * len(names))
        for part, cells in rows.items():
            print(f"| {part} | " + " | ".join(cells.get(n, "-") for n in names) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
