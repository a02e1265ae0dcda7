"""What drawing a prompt's n samples in one vLLM request saves: ``tofu_forget01_leak`` on lm-eval's vllm backend with
the n samples of a question as one request (``SamplingParams(n=...)``, :mod:`harness_ext.vllm_samples`) and as
lm-eval's n copies of the prompt (``UNLEARN_VLLM_SAMPLES=0``), interleaved on one engine; prints wall time, the
engine requests and samples, a hash of the samples (equal between two invocations: the samples are repeatable), and
the load average.

    PYTHONPATH=. python benchmarks/bench_leak_vllm.py [--model DIR] [--n 32] [--max-new-tokens 64] [--rounds 2]

Needs vLLM (the CI's vLLM stage environment, ``.ci/vllm_stage.sh``). Model: a folder, else the untrained tiny demo
Llama built here (its samples run to the token limit: it never stops early). Data: the demo corpus' ``forget01``
(6 questions); the criterion is ROUGE-L recall, so the time is the sampling's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import platform
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

TASK = "tofu_forget01_leak"


def run_once(lm, data_dir: Path, n: int, max_new_tokens: int) -> tuple[float, list]:
    """One evaluation of the leak task: (wall s, every question's samples)."""
    from harness_ext.evaluate import evaluate_lm

    metadata = {"data_dir": str(data_dir), "leak_n": n, "leak_k": sorted({1, n}), "leak_criterion": "rougeL_recall",
                "leak_max_new_tokens": max_new_tokens}
    wall = time.perf_counter()
    out = evaluate_lm(lm, [TASK], None, metadata, batch_size="auto", log_samples=True)
    return time.perf_counter() - wall, [s["resps"][0] for s in out["samples"][TASK]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="Model folder (default: the untrained tiny demo Llama).")
    parser.add_argument("--n", type=int, default=32, help="Samples per question (leak_n).")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="leak_max_new_tokens.")
    parser.add_argument("--rounds", type=int, default=2, help="Interleaved rounds of the two paths.")
    args = parser.parse_args()
    logging.disable(logging.WARNING)

    from lm_eval.models.vllm_causallms import VLLM

    from harness_ext.evaluate import model_arguments
    from harness_ext.request_types import install_request_types
    from harness_ext.vllm_samples import ENV_SWITCH
    from unlearn_methods.scaffolding.tofu_corpus import tokenizer_texts, write_corpus

    install_request_types()
    paths = {"one request per question (n samples)": "1", "lm-eval's n copies (UNLEARN_VLLM_SAMPLES=0)": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            from unlearn_methods.scaffolding.tiny_model import build_tiny_model

            model = Path(tmp) / "tiny"
            build_tiny_model(tokenizer_texts(0), model, seed=0)
        data_dir = write_corpus(Path(tmp) / "data")
        print(f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs; {datetime.now(UTC):%Y-%m-%d %H:%M:%S} "
              f"UTC; load average {os.getloadavg()[0]:.2f}; model {args.model or 'tiny demo Llama (untrained)'}; "
              f"n = {args.n}, at most {args.max_new_tokens} new tokens", flush=True)
        lm = VLLM(**model_arguments(model, "vllm"), batch_size="auto")
        requests: list[int] = []
        generate = lm.model.generate

        def counted(prompts, *a, **kw):
            requests.append(len(prompts))
            return generate(prompts, *a, **kw)

        lm.model.generate = counted
        run_once(lm, data_dir, 2, 4)  # warm-up: the first generation compiles and allocates
        for _ in range(args.rounds):
            for label, switch in paths.items():
                os.environ[ENV_SWITCH] = switch
                requests.clear()
                wall, samples = run_once(lm, data_dir, args.n, args.max_new_tokens)
                total = sum(len(s) for s in samples)
                digest = hashlib.sha256(json.dumps(samples).encode()).hexdigest()[:12]
                print(f"{label}: {wall:.1f} s wall, {sum(requests)} engine requests, {total} samples "
                      f"({1000 * wall / total:.1f} ms each), samples {digest}; load average "
                      f"{os.getloadavg()[0]:.2f}", flush=True)


if __name__ == "__main__":
    main()
