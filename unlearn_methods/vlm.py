"""Unlearning a vision-language model (LLaVA-style, ``AutoModelForImageTextToText`` + its processor) on CLEAR.

The methods' loss code is unchanged: a batch part is ``input_ids`` / ``attention_mask`` / ``labels`` plus, when its
items carry images, ``pixel_values`` (and any other tensor the processor makes), which
:func:`unlearn_methods.losses.forward` passes to the model. Items are encoded by :func:`encode_vqa`, the exact text
the CLEAR tasks score (:func:`unlearn_tasks.clear.documents.image_prompt` for image items, TOFU's prompt for text items).

``--modality``: ``image`` trains on CLEAR's caption rows (``forgetXX`` / ``retainYY``), ``text`` on the people's
question-answer rows (the text rows of ``forgetXX+tofu``), ``both`` on all rows of ``forgetXX+tofu``.
"""

from __future__ import annotations

import random
from typing import Any

import torch

from unlearn_methods.forget_retain import PARTS, ForgetRetainDataset, pad_batch
from unlearn_tasks.clear.data import load_clear
from unlearn_tasks.clear.documents import CAPTION_QUESTIONS, IMAGE_PLACEHOLDER, image_prompt
from unlearn_tasks.clear.splits import HUB_ID
from unlearn_tasks.prompts import answer_continuation, question_prompt

MODALITIES = ("text", "image", "both")


def is_vision_model(model_id: str) -> bool:
    """Whether a checkpoint is a vision-language model (its config has a vision part)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_id)
    return getattr(config, "vision_config", None) is not None


def load_vision_model(model_id: str, dtype: Any = "auto"):
    """(processor, model) of a vision-language checkpoint."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(model_id)
    model = AutoModelForImageTextToText.from_pretrained(model_id, dtype=dtype)
    if processor.tokenizer.pad_token_id is None:
        processor.tokenizer.pad_token = processor.tokenizer.eos_token
    return processor, model


def clear_records(config: str, modality: str, data_dir: str | None = None, dataset: str = HUB_ID,
                  seed: int = 0) -> list[dict]:
    """Training records ``{question, answer, image}`` of a CLEAR forget/retain config for a modality; caption rows
    get a caption question drawn with ``random.Random(seed)`` (as the evaluation draws them)."""
    if modality not in MODALITIES:
        raise ValueError(f"--modality must be one of {MODALITIES}, got {modality!r}")
    rng = random.Random(seed)
    name = config if modality == "image" else f"{config}+tofu"
    out = []
    for row in load_clear(name, data_dir, dataset):
        if row.get("image") is not None and row.get("caption"):
            if modality != "text":
                out.append({"question": rng.choice(CAPTION_QUESTIONS), "answer": row["caption"], "image": row["image"]})
        elif row.get("question") and row.get("answer") and modality != "image":
            out.append({"question": row["question"], "answer": row["answer"], "image": None})
    if not out:
        raise ValueError(f"CLEAR config {name!r} has no {modality} rows to train on.")
    return out


def mllmu_records(split: str, modality: str, data_dir: str | None = None, dataset: str | None = None) -> list[dict]:
    """Training records ``{question, answer, image}`` of an MLLMU-Bench forget or retain set (``forget05`` or a Hub
    folder name such as ``retain_95``): each profile's question-answer pair with its photo (``image``), its text-only
    generation questions with their ground truths (``text``), or both."""
    from unlearn_tasks.mllmu.data import load_mllmu
    from unlearn_tasks.mllmu.splits import FORGET_PERCENTS, HUB_ID, forget_config

    if modality not in MODALITIES:
        raise ValueError(f"--modality must be one of {MODALITIES}, got {modality!r}")
    config = forget_config(split) if split in FORGET_PERCENTS else split
    out = []
    for row in load_mllmu(config, data_dir, dataset or HUB_ID):
        if modality != "text" and row.get("question") and row.get("answer"):
            out.append({"question": row["question"], "answer": row["answer"], "image": row["image"]})
        if modality != "image":
            out += [{"question": q["Question"], "answer": q["Ground_Truth"], "image": None}
                    for q in row["Generation_Task"] or [] if q["Type"] == "Pure_Text"]
    if not out:
        raise ValueError(f"MLLMU-Bench {config!r} has no {modality} rows to train on (image rows need the "
                         "'question' and 'answer' columns).")
    return out


def encode_vqa(processor, question: str, answer: str, image=None, max_length: int | None = None) -> dict[str, Any]:
    """Token ids, labels (-100 on the prompt) and pixel values of one item, split as the CLEAR tasks score it
    (prompt and prompt + answer encoded whole, the prompt's length as the boundary, EOS appended)."""
    tokenizer = processor.tokenizer
    if image is None:
        prompt, images = question_prompt(question), None
    else:
        token = getattr(processor, "image_token", IMAGE_PLACEHOLDER)
        prompt, images = image_prompt(question).replace(IMAGE_PLACEHOLDER, token), [image]
    context = processor(text=prompt, images=images)
    whole = processor(text=prompt + answer_continuation(answer), images=images, return_tensors="pt")
    n_context = len(context["input_ids"][0])
    ids = whole["input_ids"][0].tolist()
    answer_ids = ids[n_context:] + [tokenizer.eos_token_id]
    input_ids = ids[:n_context] + answer_ids
    labels = [-100] * n_context + answer_ids
    if max_length is not None and len(input_ids) > max_length:
        raise ValueError(f"An item is {len(input_ids)} tokens with its image, more than --max-length {max_length}.")
    item: dict[str, Any] = {"input_ids": input_ids, "labels": labels}
    extra = {k: v for k, v in whole.items() if k not in ("input_ids", "attention_mask") and hasattr(v, "shape")}
    if images is not None:
        item["visual"] = extra
    return item


def collate_vqa(items: list[dict[str, Any]], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Right-padded text tensors (:func:`pad_batch`) plus the images of the items that have one, in item order."""
    batch = pad_batch([{"input_ids": x["input_ids"], "labels": x["labels"]} for x in items], pad_token_id)
    visual = [x["visual"] for x in items if x.get("visual")]
    if visual:
        for key in visual[0]:
            batch[key] = torch.cat([v[key] for v in visual], dim=0)
    return batch


class VisionForgetRetainDataset(ForgetRetainDataset):
    """:class:`ForgetRetainDataset` whose items carry their image (the refusal, random and alternate answers keep
    the forget item's image)."""

    def __init__(self, forget, retain, processor, idk_answers, seed: int = 0, max_length: int = 512,
                 alternates: list[list[str]] | None = None) -> None:
        super().__init__(forget, retain, processor.tokenizer, idk_answers, seed=seed, max_length=max_length,
                         alternates=alternates)
        self.processor = processor

    def _encode(self, record: dict, answer: str) -> dict[str, Any]:
        return encode_vqa(self.processor, record["question"], answer, record.get("image"), self.max_length)

    def __getitem__(self, k: int) -> dict[str, Any]:
        i, alternate = self.examples[k]
        f = self.forget[i]
        r = self.retain[self.retain_order[k % len(self.retain)]]
        item = {"forget": self._encode(f, f["answer"]), "retain": self._encode(r, r["answer"]),
                "forget_idk": self._encode(f, self.idk[i]), "forget_random": self._encode(f, self.alt[i])}
        if alternate is not None:
            item["forget_alternate"] = self._encode(f, alternate)
        return item


class VisionPairCollator:
    """Collates :class:`VisionForgetRetainDataset` items into ``{part: batch}`` (pixel values included)."""

    def __init__(self, pad_token_id: int) -> None:
        self.pad_token_id = pad_token_id

    def __call__(self, features: list[dict]) -> dict[str, dict[str, torch.Tensor]]:
        return {part: collate_vqa([f[part] for f in features], self.pad_token_id) for part in PARTS if part in features[0]}


def finetune_vlm(model, processor, records: list[dict], epochs: int = 30, lr: float = 3e-3, batch_size: int = 8,
                 seed: int = 0, progress: bool = False) -> list[float]:
    """Plain fine-tuning (answer tokens only) of a vision-language model on ``{question, answer, image}`` records,
    in place: the demo's and tests' way to make a model that memorised CLEAR people. Returns the epoch losses."""
    from tqdm import tqdm

    from unlearn_methods.losses import forward, mean_nll

    torch.manual_seed(seed)
    rng = random.Random(seed)
    encoded = [encode_vqa(processor, r["question"], r["answer"], r.get("image")) for r in records]
    optimiser = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    model.train()
    losses = []
    for _ in tqdm(range(epochs), desc="Fine-tuning (text + image)", disable=not progress):
        order = list(range(len(encoded)))
        rng.shuffle(order)
        total = 0.0
        for start in range(0, len(order), batch_size):
            batch = collate_vqa([encoded[i] for i in order[start : start + batch_size]], processor.tokenizer.pad_token_id)
            loss = mean_nll(forward(model, batch).logits, batch["labels"])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += loss.item() * len(order[start : start + batch_size])
        losses.append(total / len(order))
    model.eval()
    return losses


@torch.no_grad()
def answer_probability(model, processor, records: list[dict]) -> float:
    """Mean length-normalised probability ``exp(mean log p)`` of the answers (answer tokens + EOS), the CLEAR
    tasks' Probability, computed directly (for quick checks in tests and the demo)."""
    import math

    from unlearn_methods.losses import forward, token_nll

    probs = []
    for r in records:
        batch = collate_vqa([encode_vqa(processor, r["question"], r["answer"], r.get("image"))],
                            processor.tokenizer.pad_token_id)
        nll, mask = token_nll(forward(model, batch).logits, batch["labels"])
        probs.append(math.exp(-float(nll.sum() / mask.sum())))
    return sum(probs) / len(probs)
