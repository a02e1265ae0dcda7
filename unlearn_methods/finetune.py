"""Plain supervised fine-tuning on QA pairs (answer tokens only) or raw texts (every token), with the Hugging
Face Trainer.

It builds the demo's target model (all authors) and retain model (retain split only), and is the base the
unlearning methods share: the same data pairing and tokenisation as the evaluation tasks.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase, Trainer, TrainingArguments

from unlearn_methods.forget_retain import pad_batch
from unlearn_methods.prompt_format import PLAIN, PromptFormat
from unlearn_tasks.prompts import encode_text

log = logging.getLogger(__name__)


def tokenize_qa(records: list[dict], tokenizer: PreTrainedTokenizerBase, max_length: int = 256,
                prompt: PromptFormat = PLAIN) -> Dataset:
    """QA records (``question``, ``answer``) to a dataset of ``input_ids`` / ``labels`` in the prompt format
    ``prompt``; records with a ``text`` field instead (raw passages) become one example per chunk of
    :func:`unlearn_tasks.prompts.encode_text`."""
    rows = []
    for r in records:
        if "question" not in r and "text" in r:
            rows += [{"input_ids": i, "labels": lab} for i, lab in encode_text(tokenizer, r["text"], max_length)]
            continue
        ids, labels = prompt.encode(tokenizer, r["question"], r["answer"], max_length)
        rows.append({"input_ids": ids, "labels": labels})
    return Dataset.from_list(rows)


class QACollator:
    """Right-pads ``input_ids`` with the pad token and ``labels`` with -100 (``hide_pad_token``: open-unlearning's
    attention mask, see :func:`unlearn_methods.forget_retain.pad_batch`)."""

    def __init__(self, pad_token_id: int, hide_pad_token: bool = False) -> None:
        self.pad_token_id, self.hide_pad_token = pad_token_id, hide_pad_token

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        return pad_batch(features, self.pad_token_id, self.hide_pad_token)


def finetune(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    records: list[dict],
    out_dir: str | Path,
    epochs: float = 60,
    lr: float = 3e-3,
    batch_size: int = 16,
    seed: int = 0,
    disable_progress: bool = False,
    save: bool = True,
    max_steps: int = -1,
    warmup_steps: int = 10,
    prompt: PromptFormat = PLAIN,
) -> dict[str, float]:
    """Fine-tune ``model`` on ``records`` (in place); save model + tokenizer to ``out_dir`` unless ``save=False``.

    ``max_steps > 0`` trains that many optimiser steps instead of ``epochs``; ``prompt``: the prompt format of
    the QA records (:mod:`unlearn_methods.prompt_format`)."""
    args = TrainingArguments(
        output_dir=str(out_dir),
        num_train_epochs=epochs,
        max_steps=max_steps,
        learning_rate=lr,
        per_device_train_batch_size=batch_size,
        lr_scheduler_type="cosine",
        warmup_steps=warmup_steps,
        weight_decay=0.0,
        logging_steps=50,
        save_strategy="no",
        report_to=[],
        seed=seed,
        use_cpu=not torch.cuda.is_available(),
        disable_tqdm=disable_progress,
        dataloader_num_workers=0,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=tokenize_qa(records, tokenizer, prompt=prompt),
        data_collator=QACollator(tokenizer.pad_token_id, prompt.ou_chat_mask),
    )
    result = trainer.train()
    if save:
        trainer.save_model(str(out_dir))
        tokenizer.save_pretrained(str(out_dir))
    return dict(result.metrics)
