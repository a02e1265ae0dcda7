"""What Leak@k costs on the hf backend: ``tofu_forget01_leak`` with n sampled answers per question on SmolLM2, with
this package's generation patch on (``UNLEARN_FAST_GENERATE=1``, continuous batching for greedy generation) and off
(lm-eval's own path), interleaved in one process; prints wall and CPU time, the samples generated, whether the two
runs' samples are identical, and the load average.

    PYTHONPATH=. python benchmarks/bench_leak_cost.py [--model DIR|smollm2] [--n 10] [--questions 6]
        [--batch-size 16] [--max-new-tokens 200]

Data: the demo corpus' ``forget01`` (TOFU's schema, written by this project). The criterion is ROUGE-L recall (the
release's NLI model is not downloaded here), so the time is the sampling's; the NLI criterion adds one classifier
call per sample whose recall reaches the threshold. The seeds are lm-eval's (1234), the same for both runs.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path


def run_once(lm, data_dir: Path, n: int, questions: int, max_new_tokens: int) -> tuple[float, float, list]:
    """One ``simple_evaluate`` of ``tofu_forget01_leak``: (wall s, CPU s, every question's samples)."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    from harness_ext import tasks_dir

    metadata = {"data_dir": str(data_dir), "leak_n": n, "leak_k": sorted({1, 2, n}), "max_items_per_split": questions,
                "leak_criterion": "rougeL_recall", "leak_max_new_tokens": max_new_tokens}
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False, metadata=metadata)
    wall, cpu = time.perf_counter(), time.process_time()
    out = simple_evaluate(model=lm, tasks=["tofu_forget01_leak"], task_manager=tm, log_samples=True)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, [s["resps"][0] for s in out["samples"]["tofu_forget01_leak"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="Model folder, or 'smollm2' (the real-model fixture).")
    parser.add_argument("--n", type=int, default=10, help="Samples per question (leak_n).")
    parser.add_argument("--questions", type=int, default=6, help="Forget01 questions (the demo corpus has 6).")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=200, help="leak_max_new_tokens (the release's 200).")
    args = parser.parse_args()
    logging.disable(logging.WARNING)

    import torch
    from lm_eval.models.huggingface import HFLM

    from harness_ext.generation import ENV_SWITCH
    from harness_ext.request_types import install_request_types
    from unlearn_methods.pretrained import resolve_model
    from unlearn_methods.scaffolding.tofu_corpus import write_corpus

    torch.set_num_threads(1)
    install_request_types()
    model = resolve_model(args.model) if args.model == "smollm2" else args.model
    print(f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs; {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC; "
          f"load average {os.getloadavg()[0]:.2f}; one torch thread; model {model}; n = {args.n}, "
          f"{args.questions} questions, batch {args.batch_size}, at most {args.max_new_tokens} new tokens", flush=True)
    lm = HFLM(pretrained=str(model), batch_size=args.batch_size, device="cpu", dtype="float32")
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = write_corpus(Path(tmp))
        runs = {}
        for switch in ("1", "0"):
            os.environ[ENV_SWITCH] = switch
            runs[switch] = run_once(lm, data_dir, args.n, args.questions, args.max_new_tokens)
            wall, cpu, samples = runs[switch]
            label = "patch on (continuous batching for greedy)" if switch == "1" else "lm-eval's own path"
            print(f"{label}: {wall:.1f} s wall, {cpu:.1f} s CPU, {sum(len(s) for s in samples)} samples "
                  f"({wall / sum(len(s) for s in samples):.2f} s each); load average {os.getloadavg()[0]:.2f}",
                  flush=True)
    print(f"identical samples: {runs['1'][2] == runs['0'][2]}")


if __name__ == "__main__":
    main()
