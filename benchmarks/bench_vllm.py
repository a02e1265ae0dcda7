"""End-to-end wall time of the TOFU generation task, lm-eval's hf backend vs its vllm backend, same model.

    python benchmarks/bench_vllm.py [--model DIR] [--data-dir DIR] [--task tofu_forget10_rouge] [--batch-size 64]

Without --model it builds the tiny demo Llama (random weights: every answer runs to the 200-token limit, the
worst case for generation) and the demo corpus. Needs vLLM (`pip install lm-eval-unlearning[vllm]`, or the CPU
recipe in .ci/vllm_stage.sh). Prints both wall times (model load included) and the hf/vllm ratio.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="Model folder or Hub id (default: the tiny demo Llama, random weights).")
    parser.add_argument("--data-dir", help="TOFU-schema data folder (default: the demo corpus).")
    parser.add_argument("--task", default="tofu_forget10_rouge")
    parser.add_argument("--batch-size", default="64", help="hf batch size (vLLM batches continuously).")
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    logging.disable(logging.WARNING)

    from harness_ext.evaluate import run_lm_eval
    from harness_ext.results import task_metrics

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
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        times, numbers = {}, {}
        for backend in ("hf", "vllm"):
            start = time.perf_counter()
            res = run_lm_eval(model, [args.task], Path(tmp) / backend, {"data_dir": data_dir}, backend=backend,
                              batch_size=int(args.batch_size) if backend == "hf" else "auto",
                              device=device if backend == "hf" else None, extra_model_args={"dtype": args.dtype})
            times[backend] = time.perf_counter() - start
            numbers[backend] = task_metrics(res)[args.task]
        n_docs = res["n-samples"][args.task]["effective"]
        print(f"{args.task} on {model} ({n_docs} documents, {device}, {args.dtype})")
        for backend in ("hf", "vllm"):
            rouge = numbers[backend].get("forget_rougeL_recall", float("nan"))
            print(f"{backend:5s} {times[backend]:8.1f} s   forget ROUGE-L recall {rouge:.4f}")
        print(f"hf / vllm wall-time ratio: {times['hf'] / times['vllm']:.2f}")


if __name__ == "__main__":
    main()
