"""One evaluation during unlearning: in process on the live model (what ``unlearn run --eval-every`` does) vs
saving the weights and running lm-eval on the saved folder (what a user would otherwise script), same task.

Prints both wall times per repeat (the two sides interleaved) and their ratio, and checks the metrics agree.

    PYTHONPATH=. python benchmarks/bench_eval_during.py [--task tofu_forget01_likelihood] [--limit 20] [--repeats 3]
        [--model DIR]   # default: the tiny demo Llama, built in a temporary folder
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from harness_ext.evaluate import evaluate_lm, live_hf_lm, run_lm_eval
from harness_ext.results import task_metrics


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="tofu_forget01_likelihood")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--model", help="model folder (default: the tiny demo Llama)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from unlearn_methods.scaffolding.tiny_model import build_tiny_model
    from unlearn_methods.scaffolding.tofu_corpus import tokenizer_texts, write_corpus

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        data = write_corpus(tmp / "data")
        model_dir = Path(args.model) if args.model else tmp / "model"
        if not args.model:
            build_tiny_model(tokenizer_texts(0), model_dir, seed=0)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        metadata = {"data_dir": str(data)}
        live_times, saved_times = [], []
        for i in range(args.repeats):
            start = time.perf_counter()
            with torch.no_grad():
                live = task_metrics(evaluate_lm(live_hf_lm(model.eval(), tokenizer), [args.task], metadata=metadata,
                                                limit=args.limit))
            live_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            saved_dir = tmp / f"saved{i}"
            model.save_pretrained(saved_dir)
            tokenizer.save_pretrained(saved_dir)
            saved = task_metrics(run_lm_eval(saved_dir, [args.task], tmp / f"out{i}", metadata, limit=args.limit))
            saved_times.append(time.perf_counter() - start)
            print(f"repeat {i + 1}: in process {live_times[-1]:.2f} s | save + reload {saved_times[-1]:.2f} s", flush=True)
        diffs = [abs(live[args.task][m] - v) for m, v in saved[args.task].items() if math.isfinite(v)]
        print(f"\nmachine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
              f"task {args.task}, limit {args.limit}")
        print("| side | median s |\n|---|---:|")
        print(f"| in process (live model) | {statistics.median(live_times):.2f} |")
        print(f"| save + run_lm_eval on the folder | {statistics.median(saved_times):.2f} |")
        print(f"ratio save+reload / in process: {statistics.median(saved_times) / statistics.median(live_times):.2f}; "
              f"largest metric difference {max(diffs):.2e}")


if __name__ == "__main__":
    main()
