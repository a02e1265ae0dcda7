"""Relearning attack (Hu et al., "Jogging the Memory of Unlearned LLMs Through Targeted Relearning Attacks", 2024).

A seeded ``relearn_fraction`` of the forget set is shown to the unlearned model in a short fine-tuning run
(:func:`unlearn_methods.finetune.finetune`, answer tokens only); the rest is held out. Knowledge that comes back
on the held-out items was never shown by the attack, so it was still in the weights. The held-out forget
probability (mean length-normalised answer probability, TOFU's "probability" without the retain-style ratio) is
measured before and after.

With a related corpus (``relearn_data``, :mod:`unlearn_methods.attacks.corpus`) the corpus is shown *instead of* any
forget item, so the whole forget set is held out and measured; if ``relearn_fraction`` is also given, only the
held-out part of the same seeded split is measured (the items the forget-set attack with that seed and fraction
holds out), so the two attacks are compared on the same items. ``relearn.json`` records which (``measured``) and
the corpus used (path, format, kind, rows, sha256).
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from unlearn_methods import checkpoint_folder
from unlearn_methods.finetune import finetune
from unlearn_methods.forget_retain import load_qa
from unlearn_tasks.prompts import encode_qa
from unlearn_tasks.tofu.splits import HUB_ID


@dataclass
class RelearnResult:
    model: str
    forget: str
    relearn_fraction: float | None  # None: a related corpus was shown and the whole forget set measured
    steps: int
    lr: float
    seed: int
    shown: list[int] = field(default_factory=list)  # indices into the forget split shown to the model
    held_out: list[int] = field(default_factory=list)  # indices measured (never shown)
    held_out_prob_before: float = math.nan
    held_out_prob_after: float = math.nan
    shown_prob_before: float | None = None  # None when no forget item was shown (related corpus)
    shown_prob_after: float | None = None
    #: "held-out part of the forget set" or "whole forget set (none shown)"
    measured: str = "held-out part of the forget set"
    relearn_data: dict | None = None  # the related corpus used: path, format, kind, rows, columns, sha256
    train_loss: float = math.nan


def split_forget(n: int, fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Seeded split of ``n`` forget items into (shown, held out) sorted index lists; both non-empty."""
    if not 0 < fraction < 1:
        raise ValueError(f"--relearn-fraction must be between 0 and 1 (exclusive), got {fraction}")
    if n < 2:
        raise ValueError(f"the forget split has {n} item(s); the attack needs at least 2 (one shown, one held out)")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    k = min(n - 1, max(1, round(fraction * n)))
    return sorted(order[:k]), sorted(order[k:])


def answer_probability(model, tokenizer, records: list[dict]) -> float:
    """Mean over records of exp(mean answer-token log-probability) (length-normalised answer probability)."""
    probs = []
    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        for r in records:
            ids, labels = encode_qa(tokenizer, r["question"], r["answer"])
            logits = model(torch.tensor([ids], device=device)).logits[0, :-1]
            lp = torch.log_softmax(logits.float(), -1)
            tgt = torch.tensor(labels[1:], device=device)
            keep = tgt != -100
            probs.append(math.exp(lp[keep].gather(-1, tgt[keep][:, None]).mean().item()))
    return sum(probs) / len(probs)


def _blur_records(forget: str, blur_references: str | Path | None, data_dir: str | None) -> list[dict]:
    from unlearn_methods.blur import answered
    from unlearn_tasks.blur.references import load_references

    if not blur_references:
        raise ValueError("--data blur needs --blur-references PATH (the base model's answers: `unlearn "
                         "blur-references --model BASE --out DIR`).")
    return answered(forget, load_references(blur_references).answers, data_dir)


def relearn(model_dir: str | Path, out: str | Path, *, data: str = "tofu", forget: str = "forget10",
            data_dir: str | None = None, relearn_fraction: float | None = None, relearn_data: str | Path | None = None,
            steps: int = 20, lr: float = 1e-5, batch_size: int = 4, seed: int = 0,
            progress: bool = True, blur_references: str | Path | None = None) -> RelearnResult:
    """Fine-tune ``model_dir`` on a seeded part of ``forget`` (``relearn_fraction``, default 0.5) or on a related
    corpus (``relearn_data``, see the module docstring); save the checkpoint, ``relearn_split.json`` and
    ``relearn.json`` (probabilities before/after) to ``out``. With ``data="blur"``, ``forget`` is a BLUR query file
    (``rwku_forget``) and its records are the queries with the base model's answers from ``blur_references``
    (:mod:`unlearn_tasks.blur.references`): the probability measured is that of the base model's answers."""
    from unlearn_methods.attacks.corpus import read_corpus

    with checkpoint_folder.writing(out) as folder:  # ``out`` appears when complete
        corpus = read_corpus(relearn_data) if relearn_data is not None else None
        if data == "demo" and not data_dir:
            from unlearn_methods.scaffolding.tofu_corpus import write_corpus

            data_dir = str(write_corpus(folder / "demo_data"))
        if data == "blur":
            records = _blur_records(forget, blur_references, data_dir)
        else:
            records = load_qa(forget, HUB_ID if data in ("tofu", "demo") else data, data_dir=data_dir)
        if corpus is None:
            relearn_fraction = 0.5 if relearn_fraction is None else relearn_fraction
            shown, held = split_forget(len(records), relearn_fraction, seed)
        elif relearn_fraction is None:
            shown, held = [], list(range(len(records)))
        else:  # the corpus replaces the shown part; measure the same held-out items as the forget-set attack
            shown, held = [], split_forget(len(records), relearn_fraction, seed)[1]
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="auto")
        shown_r, held_r = [records[i] for i in shown], [records[i] for i in held]
        result = RelearnResult(str(model_dir), forget, relearn_fraction, steps, lr, seed, shown, held)
        if corpus is not None:
            result.measured = "whole forget set (none shown)" if relearn_fraction is None else \
                "held-out part of the forget set (none shown)"
            result.relearn_data = corpus.describe()
        result.held_out_prob_before = answer_probability(model, tokenizer, held_r)
        if shown_r:
            result.shown_prob_before = answer_probability(model, tokenizer, shown_r)
        model.train()
        metrics = finetune(model, tokenizer, corpus.records if corpus is not None else shown_r, folder, lr=lr,
                           batch_size=batch_size, seed=seed, max_steps=steps, warmup_steps=0,
                           disable_progress=not progress)
        result.train_loss = float(metrics.get("train_loss", math.nan))
        result.held_out_prob_after = answer_probability(model, tokenizer, held_r)
        if shown_r:
            result.shown_prob_after = answer_probability(model, tokenizer, shown_r)
        (folder / "relearn_split.json").write_text(json.dumps(
            {"forget": forget, "seed": seed, "relearn_fraction": relearn_fraction, "measured": result.measured,
             "relearn_data": result.relearn_data, "shown": shown, "held_out": held,
             "shown_questions": [r["question"] for r in shown_r], "held_out_questions": [r["question"] for r in held_r]},
            indent=2) + "\n")
        (folder / "relearn.json").write_text(json.dumps(asdict(result), indent=2) + "\n")
        return result
