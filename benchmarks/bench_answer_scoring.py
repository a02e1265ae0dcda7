"""Peak memory and time of answer scoring at Llama-3's 128,256-token vocabulary: our ``unlearn_answer_logprobs``
request (per-token log-probs + Min-K%++ statistics + margins) vs lm-eval's own ``loglikelihood`` on the same
requests, hf backend, CPU.

    PYTHONPATH=. python benchmarks/bench_answer_scoring.py [--batch-sizes 8 32] [--requests 96] [--dtype bfloat16]

The model is a random-initialised Llama (2 layers, hidden 256, untied 128,256-token embeddings, so the logits are
as wide as Llama-3's) with the demo corpus' tokenizer. Requests are TOFU-shaped: a demo-corpus question, and an
answer of three demo-corpus answers joined (about 40-50 tokens, TOFU's typical answer length).

Each measurement runs in a fresh process. What is measured: the process' resident set size (RSS, from
/proc/self/status) just before the scoring call, and its peak during the call (VmHWM, reset with
/proc/self/clear_refs just before the call; a 2 ms sampling thread where that reset is not allowed). The
difference is the memory the scoring itself needs on top of the loaded model: logits, log-softmax, statistics.
torch's CPU allocator returns large blocks to the OS, so RSS follows tensor allocations closely.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

VOCAB = 128_256


def _rss_kib(field: str = "VmRSS") -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


class PeakRSS:
    """Peak RSS over a block: the kernel's VmHWM after resetting it, else a sampling thread."""

    def __enter__(self) -> PeakRSS:
        self.before = _rss_kib()
        try:
            Path("/proc/self/clear_refs").write_text("5")
            self.method = "VmHWM"
        except OSError:
            self.method = "sampling"
            self._peak, self._stop = self.before, threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self._peak = max(self._peak, _rss_kib())
            time.sleep(0.002)

    def __exit__(self, *exc) -> None:
        if self.method == "VmHWM":
            self.peak = _rss_kib("VmHWM")
        else:
            self._stop.set()
            self._thread.join()
            self.peak = max(self._peak, _rss_kib())


def build_model(out: Path) -> None:
    import torch
    from transformers import LlamaForCausalLM

    from unlearn_methods.scaffolding.tiny_model import tiny_llama_config, train_tokenizer
    from unlearn_methods.scaffolding.tofu_corpus import tokenizer_texts

    torch.manual_seed(0)
    config = tiny_llama_config(VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=False)
    LlamaForCausalLM(config).save_pretrained(out)
    train_tokenizer(tokenizer_texts()).save_pretrained(out)


def tofu_shaped_requests(n: int) -> list[tuple[str, str]]:
    from unlearn_methods.scaffolding.tofu_corpus import build_corpus
    from unlearn_tasks.prompts import answer_continuation, question_prompt

    rows = build_corpus()["full"]
    pairs = []
    for i in range(n):
        row = rows[i % len(rows)]
        answer = " ".join(rows[(i + k) % len(rows)]["answer"] for k in range(3))
        pairs.append((question_prompt(row["question"]), answer_continuation(answer)))
    return pairs


def measure(side: str, model: str, batch_size: int, n_requests: int, dtype: str) -> dict:
    import torch
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from harness_ext.request_types import ANSWER_LOGPROBS, install_request_types

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    install_request_types()
    lm = HFLM(pretrained=model, device="cpu", batch_size=batch_size, dtype=dtype)
    kind = ANSWER_LOGPROBS if side == "ours" else "loglikelihood"
    requests = [Instance(request_type=kind, doc={}, arguments=pair, idx=0) for pair in tofu_shaped_requests(n_requests)]
    n_tokens = sum(len(lm.tok_encode(r.args[1], add_special_tokens=False)) for r in requests)
    start = time.perf_counter()
    with PeakRSS() as rss:
        out = getattr(lm, kind)(requests)
    seconds = time.perf_counter() - start
    total = sum(sum(o["logprobs"]) for o in out) if side == "ours" else sum(ll for ll, _ in out)
    return {"side": side, "batch_size": batch_size, "seconds": seconds, "rss_before_mib": rss.before / 1024,
            "peak_growth_mib": (rss.peak - rss.before) / 1024, "method": rss.method,
            "answer_tokens": n_tokens, "checksum": total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--requests", type=int, default=96)
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--model", help="use this model folder instead of building the random 128k-vocab Llama")
    parser.add_argument("--_child", nargs=2, metavar=("SIDE", "BATCH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._child:
        print(json.dumps(measure(args._child[0], args.model, int(args._child[1]), args.requests, args.dtype)))
        return

    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}; "
          f"date {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}")
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            model = str(Path(tmp) / "llama128k")
            build_model(Path(model))
        print(f"model: {model if args.model else 'random Llama, 2 layers, hidden 256, vocabulary 128,256'}, "
              f"{args.dtype}; {args.requests} TOFU-shaped requests")
        print("RSS before: resident memory with the model loaded; peak growth: peak RSS during the scoring call "
              "minus RSS before it")
        print(f"{'batch':>5} {'side':<34} {'time s':>7} {'RSS before MiB':>15} {'peak growth MiB':>16}")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        for batch in args.batch_sizes:
            rows = {}
            for side in ("lm_eval", "ours"):
                cmd = [sys.executable, __file__, "--model", model, "--requests", str(args.requests),
                       "--dtype", args.dtype, "--_child", side, str(batch)]
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    sys.exit(f"{side} (batch {batch}) failed:\n{done.stderr[-3000:]}")
                rows[side] = r = json.loads(done.stdout.strip().splitlines()[-1])
                label = "lm-eval loglikelihood" if side == "lm_eval" else "unlearn_answer_logprobs (+stats)"
                print(f"{batch:>5} {label:<34} {r['seconds']:>7.2f} {r['rss_before_mib']:>15.0f} "
                      f"{r['peak_growth_mib']:>16.0f}")
            ratio = rows["ours"]["peak_growth_mib"] / max(rows["lm_eval"]["peak_growth_mib"], 1e-9)
            print(f"{batch:>5} peak growth ours / lm-eval: {ratio:.2f}  (measured with {rows['ours']['method']})")


if __name__ == "__main__":
    main()
