"""How long a bare ``lm_eval`` run is silent: seconds from the process start to its first line of output, to the
first line of this package's start-up messages (:mod:`harness_ext.startup`) and to lm-eval's own first line
(``Selected Tasks``, logged after it has indexed every task YAML it ships: the first line a user saw before those
messages). One run of ``lm_eval --tasks tofu_forget01`` (no ``--limit``, whose warning would come first) on the tiny
demo Llama and the demo corpus, one torch thread, wall seconds (the figure a user waits; it grows with the load).

    PYTHONPATH=. python benchmarks/bench_first_line.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_startup import write_inputs  # noqa: E402  (the tiny model and corpus, as the start-up benchmark's)

MARKS = {"first line": "", "ours: first": "[lm_eval_unlearning:", "ours: index done": "] Indexed ",
         "lm-eval: Selected Tasks": "Selected Tasks", "lm-eval: first request": "Running "}


def run_once(model: str, data: str, work: Path) -> dict[str, float]:
    """Seconds from the start to the first line holding each of :data:`MARKS` (the run is stopped at the last)."""
    command = [sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", f"pretrained={model},dtype=float32",
               "--device", "cpu", "--tasks", "tofu_forget01", "--metadata", json.dumps({"data_dir": data})]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seen: dict[str, float] = {}
    for line in proc.stderr:
        for name, text in MARKS.items():
            if name not in seen and text in line:
                seen[name] = time.perf_counter() - start
        if len(seen) == len(MARKS):
            break
    proc.kill()
    proc.wait()
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model, data, _ = write_inputs(Path(tmp))
        runs = [run_once(model, data, Path(tmp)) for _ in range(args.repeats)]
    print(f"load average at the end: {os.getloadavg()[0]:.1f}; wall seconds from the process start, min / median of "
          f"{len(runs)}")
    for name in MARKS:
        values = [r[name] for r in runs if name in r]
        if values:
            print(f"  {name:<26} {min(values):7.1f} / {statistics.median(values):7.1f}")
        else:
            print(f"  {name:<26} not seen")


if __name__ == "__main__":
    main()
