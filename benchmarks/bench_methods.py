"""Training throughput of every unlearning method vs a plain Trainer fine-tuning step, on the same tiny Llama.

Prints, per method, forget-set tokens per second and the time ratio to plain fine-tuning on the same forget
batches (the overhead of the unlearning loss: extra forward passes for retain data, a reference model, ...).

    python benchmarks/bench_methods.py [--steps 40] [--batch-size 8] [--lora]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

import torch
from transformers import PrinterCallback, Trainer, TrainingArguments
from transformers.utils import logging as hf_logging

from unlearn_methods import all_methods, get_method
from unlearn_methods.base import UnlearnTrainer
from unlearn_methods.finetune import QACollator, tokenize_qa
from unlearn_methods.forget_retain import ForgetRetainDataset, PairCollator
from unlearn_methods.idk import load_idk_answers
from unlearn_methods.scaffolding.tiny_model import build_tiny_model
from unlearn_methods.scaffolding.tofu_corpus import build_corpus, tokenizer_texts

METHODS = all_methods()


def _args(out: str, steps: int, batch_size: int) -> TrainingArguments:
    return TrainingArguments(output_dir=out, max_steps=steps, per_device_train_batch_size=batch_size, learning_rate=1e-4,
                             save_strategy="no", report_to=[], disable_tqdm=True, use_cpu=not torch.cuda.is_available(),
                             remove_unused_columns=False, logging_steps=10_000, seed=0, dataloader_num_workers=0)


def _timed(trainer: Trainer) -> float:
    trainer.remove_callback(PrinterCallback)
    start = time.perf_counter()
    trainer.train()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lora", action="store_true", help="Wrap the model with LoRA adapters (r=8) for every run.")
    args = parser.parse_args()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    logging.disable(logging.WARNING)
    torch.manual_seed(0)

    corpus = build_corpus()
    forget = corpus["forget10"]
    retain = corpus["retain90"]
    with tempfile.TemporaryDirectory() as tmp:
        _, tokenizer = build_tiny_model(tokenizer_texts(), Path(tmp) / "m")

        def model():
            from transformers import AutoModelForCausalLM

            m = AutoModelForCausalLM.from_pretrained(Path(tmp) / "m")
            if args.lora:
                from peft import LoraConfig, get_peft_model

                m = get_peft_model(m, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"))
            return m

        plain_data = tokenize_qa(forget, tokenizer)
        forget_tokens = sum(len(x) for x in plain_data["input_ids"]) / len(plain_data)
        tokens = forget_tokens * args.batch_size * args.steps
        plain = _timed(Trainer(model=model(), args=_args(tmp, args.steps, args.batch_size), train_dataset=plain_data,
                               data_collator=QACollator(tokenizer.pad_token_id)))
        print(f"tiny Llama, {args.steps} steps x batch {args.batch_size}, {'LoRA' if args.lora else 'full'}; "
              f"device {'cuda' if torch.cuda.is_available() else 'cpu'}, torch threads {torch.get_num_threads()}")
        print(f"{'method':12s} {'forget tok/s':>13s} {'time ratio vs plain':>20s}")
        print(f"{'plain FT':12s} {tokens / plain:13.0f} {1.0:20.2f}")
        pairs = ForgetRetainDataset(forget, retain, tokenizer, load_idk_answers(), seed=0)
        # AltPO: one alternate per forget question (another forget item's answer stands in for a generated one)
        alternates = [[forget[(i + 1) % len(forget)]["answer"]] for i in range(len(forget))]
        altpo_pairs = ForgetRetainDataset(forget, retain, tokenizer, load_idk_answers(), seed=0, alternates=alternates)
        for name in sorted(METHODS):
            method = get_method(name)
            if not method.trains:
                print(f"{name:12s} {'(weight arithmetic after a plain fine-tuning; no loss to time)':>34s}")
                continue
            if name == "whp":
                method.reinforced = model().eval()  # what prepare() would build, without its training
            trainer = UnlearnTrainer(model=model(), args=_args(tmp, args.steps, args.batch_size),
                                     train_dataset=altpo_pairs if name == "altpo" else pairs,
                                     data_collator=PairCollator(tokenizer.pad_token_id), method=method)
            seconds = _timed(trainer)
            print(f"{name:12s} {tokens / seconds:13.0f} {seconds / plain:20.2f}")


if __name__ == "__main__":
    main()
