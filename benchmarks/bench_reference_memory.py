"""Peak memory and time per optimiser step of a full-fine-tuning ``unlearn run`` (NPO by default) on
SmolLM2-135M-Instruct, this checkout against another checkout of the package (``--before``, e.g. the commit before
the reference's values were computed once: ``git archive COMMIT | tar -x -C /tmp/before``), run interleaved, each
run in a fresh process under ``/usr/bin/time -v`` (its peak resident memory). The data: the demo corpus's forget01
(6 forget items), float32, CPU.

    PYTHONPATH=. python benchmarks/bench_reference_memory.py --before /tmp/before [--method npo] [--pairs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(root: Path, model: Path, data: Path, out: Path, args: argparse.Namespace) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": str(args.threads)}
    command = ["/usr/bin/time", "-v", sys.executable, "-m", "unlearn_app", "run", "--method", args.method,
               "--model", str(model), "--data-dir", str(data), "--forget", "forget01", "--full", "--epochs",
               str(args.epochs), "--batch-size", str(args.batch_size), "--max-length", "128", "--seed", "0",
               "--quiet", "--out", str(out)]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=str(out.parent), capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{root}: unlearn run failed:\n{done.stderr[-3000:]}")
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    saved = json.loads((out / "train_metrics.json").read_text())
    steps = max(row.get("step", 0) for row in saved["log_history"])
    return {"rss_mib": rss_kb / 1024, "wall_s": wall, "step_s": saved["metrics"]["train_runtime"] / steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="a checkout of the package to compare with")
    parser.add_argument("--method", default="npo")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from unlearn_methods.pretrained import build_smollm2
    from unlearn_methods.scaffolding.tofu_corpus import write_corpus

    model = build_smollm2()
    sides = {"before": Path(args.before).resolve(), "after": ROOT}
    results: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        data = write_corpus(Path(tmp) / "data")
        for pair in range(args.pairs):
            for side, root in sides.items():
                out = Path(tmp) / f"{side}{pair}"
                results[side].append(_run(root, model, data, out, args))
                print(f"pair {pair + 1} {side}: {results[side][-1]}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"\n{args.method}, full fine-tuning, SmolLM2-135M-Instruct float32, demo forget01, batch {args.batch_size}, "
          f"{args.epochs} epochs, {args.threads} threads, medians of {args.pairs}\n")
    print("| side | peak RSS MiB | s per optimiser step | wall s |\n|---|---:|---:|---:|")
    for side, rows in results.items():
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(f"| {side} | {med['rss_mib']:,.0f} | {med['step_s']:.2f} | {med['wall_s']:.1f} |")


if __name__ == "__main__":
    main()
