"""Where the time of a full TOFU evaluation goes: `tofu_forget10` (every metric) through lm-eval's hf backend.

    PYTHONPATH=. python benchmarks/bench_tofu_eval.py [--model DIR] [--data-dir DIR] [--task tofu_forget10]
        [--batch-size 16] [--open-unlearning DIR]

Without --model it builds the tiny demo Llama (random weights: every greedy answer runs to the 200-token
limit, the worst case for generation) and the demo corpus (TOFU schema). The run is split into: model load,
generation (`generate_until`: the ROUGE answers), answer scoring (`unlearn_answer_logprobs`: the probability,
truth-ratio and MIA requests, up to seven per question), lm-eval's other work (task building, request
construction, metric aggregation), measured by wrapping the two request methods with timers.

--open-unlearning (a checkout of locuslab/open-unlearning, run with its own evaluator on the same model and
data) is not wired up yet: the script says so and runs our side only.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import platform
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path


def _timed_methods(timings: dict[str, float], counts: dict[str, int]) -> None:
    from lm_eval.api.model import LM
    from lm_eval.models.huggingface import HFLM

    from harness_ext.lm_eval_compat import ANSWER_LOGPROBS, install_request_types

    install_request_types()
    for cls, name in ((HFLM, "generate_until"), (HFLM, "loglikelihood"), (LM, ANSWER_LOGPROBS)):
        original = getattr(cls, name)

        @functools.wraps(original)
        def wrapper(self, requests, *args, _original=original, _name=name, **kwargs):
            start = time.perf_counter()
            try:
                return _original(self, requests, *args, **kwargs)
            finally:
                timings[_name] += time.perf_counter() - start
                counts[_name] += len(requests)

        setattr(cls, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="Model folder (default: the tiny demo Llama, random weights).")
    parser.add_argument("--data-dir", help="TOFU-schema data folder (default: the demo corpus).")
    parser.add_argument("--task", default="tofu_forget10")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--open-unlearning", metavar="DIR", help="open-unlearning checkout (not wired up yet).")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs; "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average {os.getloadavg()[0]:.1f} "
          "(above the core count means other work shared the CPU)")
    if args.open_unlearning:
        print(f"--open-unlearning {args.open_unlearning}: running open-unlearning's evaluator side by side is not "
              "implemented yet; timing our side only.")
    else:
        print("open-unlearning side skipped (give --open-unlearning DIR once it is supported).")

    from harness_ext.evaluate import run_lm_eval
    from harness_ext.results import task_metrics

    timings: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    _timed_methods(timings, counts)
    with tempfile.TemporaryDirectory() as tmp:
        model, data_dir = args.model, args.data_dir
        if data_dir is None:
            from unlearn_tasks.tofu.demo_corpus import write_corpus

            data_dir = str(write_corpus(Path(tmp) / "data"))
        if model is None:
            from unlearn_methods.tiny_model import build_tiny_model
            from unlearn_tasks.tofu.demo_corpus import tokenizer_texts

            model = str(Path(tmp) / "model")
            build_tiny_model(tokenizer_texts(), model)
        start = time.perf_counter()
        res = run_lm_eval(model, [args.task], Path(tmp) / "out", {"data_dir": data_dir}, batch_size=args.batch_size,
                          extra_model_args={"dtype": args.dtype})
        total = time.perf_counter() - start
    metrics = task_metrics(res)[args.task]
    print(f"{args.task} on {args.model or 'the tiny demo Llama'} (hf, cpu, {args.dtype}, batch {args.batch_size}): "
          f"{res['n-samples'][args.task]['effective']} documents, {len(metrics)} metrics")
    print(f"{'part':<40} {'seconds':>8} {'share':>6} {'requests':>9}")
    parts = [("generation (generate_until)", "generate_until"),
             ("answer scoring (unlearn_answer_logprobs)", "unlearn_answer_logprobs"),
             ("lm-eval loglikelihood", "loglikelihood")]
    for label, key in parts:
        if counts[key]:
            print(f"{label:<40} {timings[key]:>8.2f} {timings[key] / total:>6.0%} {counts[key]:>9}")
    rest = total - sum(timings[k] for _, k in parts)
    print(f"{'model load, tasks, metrics (the rest)':<40} {rest:>8.2f} {rest / total:>6.0%}")
    print(f"{'total':<40} {total:>8.2f}")
    shown = {k: v for k, v in metrics.items() if isinstance(v, float)}
    print("metrics: " + ", ".join(f"{k} {v:.4f}" for k, v in sorted(shown.items())[:8]) + ", ...")


if __name__ == "__main__":
    main()
