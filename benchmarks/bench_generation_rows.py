"""lm-eval's greedy ``generate_until`` on TOFU prompts, its own path and ours (``harness_ext.generation``: continuous
batching, rows leave at EOS and the next prompts join), interleaved in one process; prints each time (wall and
CPU), the load average, and whether the texts are identical.

    PYTHONPATH=. python benchmarks/bench_generation_rows.py [--model DIR|smollm2] [--n 16] [--batch-size 8] [--pairs 2]
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import time
from datetime import UTC, datetime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="Model folder, or 'smollm2' (the real-model fixture).")
    parser.add_argument("--n", type=int, default=16, help="Number of prompts (demo corpus forget10 then retain90).")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--pairs", type=int, default=2, help="Old/new pairs to run.")
    args = parser.parse_args()
    logging.disable(logging.WARNING)

    import torch
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from harness_ext.generation import ENV_SWITCH
    from harness_ext.request_types import install_request_types
    from unlearn_methods.pretrained import NAMES, resolve_model
    from unlearn_methods.scaffolding.tofu_corpus import build_corpus
    from unlearn_tasks.prompts import question_prompt, tofu_generation_prompt

    torch.set_num_threads(1)
    print(f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs; {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC; "
          f"load average {os.getloadavg()[0]:.2f}; one torch thread; batch {args.batch_size}, {args.n} prompts",
          flush=True)
    install_request_types()
    model = resolve_model(args.model) if args.model in NAMES else args.model
    lm = HFLM(pretrained=str(model), batch_size=args.batch_size, device="cpu", dtype="float32")
    corpus = build_corpus()
    questions = [r["question"] for split in ("forget10", "retain90") for r in corpus[split]][: args.n]
    gen = {"until": [], "max_gen_toks": 200, "do_sample": False, "temperature": 0.0}
    requests = [Instance("generate_until", {}, (tofu_generation_prompt(question_prompt(q)), dict(gen)), i)
                for i, q in enumerate(questions)]
    texts: dict[str, list[str]] = {}
    for mode in ("0", "1") * args.pairs:
        os.environ[ENV_SWITCH] = mode
        start, cpu = time.perf_counter(), time.process_time()
        texts.setdefault(mode, lm.generate_until(requests, disable_tqdm=True))
        print(f"{'ours' if mode == '1' else 'lm-eval'} {time.perf_counter() - start:7.1f} s wall "
              f"{time.process_time() - cpu:7.1f} s CPU   load average {os.getloadavg()[0]:.2f}", flush=True)
    print(f"texts identical: {texts['0'] == texts['1']}; answer tokens: {[len(lm.tok_encode(t)) for t in texts['0']]}")


if __name__ == "__main__":
    main()
