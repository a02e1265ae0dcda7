"""Forget / retain pairing for unlearning, from any TOFU-schema source (Hub id, local folder, demo corpus), or
from raw text corpora (MUSE) for the methods whose losses apply to plain text.

Each training example is anchored on one forget item and carries: the forget QA (``forget``), a retain QA
(``retain``, cycled with a seeded permutation), the forget question with a refusal answer (``forget_idk``, IDK
methods; a record's own ``preferred`` answer when it has one), the forget question with a random retain item's answer (``forget_random``, LLMU's mismatch term), and,
when alternate answers are given (AltPO), the forget question with a plausible alternate answer
(``forget_alternate``; one example per alternate). All are tokenised in the run's prompt format
(:class:`unlearn_methods.prompt_format.PromptFormat`: :func:`unlearn_tasks.prompts.encode_qa`, the token split the
evaluation tasks score, or the chat template as open-unlearning trains).
"""

from __future__ import annotations

import random
from typing import Any

import torch
from torch.utils.data import Dataset

from unlearn_methods.prompt_format import PLAIN, PromptFormat
from unlearn_tasks.dataset_loader import check_rows, load_config, load_split, source_name
from unlearn_tasks.prompts import encode_text
from unlearn_tasks.tofu.splits import HUB_ID

PARTS = ("forget", "retain", "forget_idk", "forget_random", "forget_alternate")
#: Parts of a raw-text example: no question, so no refusal, random or alternate answer.
TEXT_PARTS = ("forget", "retain")


def load_qa(split: str, dataset: str = HUB_ID, data_dir: str | None = None) -> list[dict]:
    """QA records of one config (``question``, ``answer``) through the shared loader."""
    rows = load_config(dataset, split, ("question", "answer"), data_dir=data_dir).select_columns(["question", "answer"]).to_list()
    check_rows(rows, ("question", "answer"), source_name(dataset, split, data_dir))
    return rows


def evaldu_forget_retain(kb_dir: str, target: int, minimal_set: bool = False) -> tuple[list[dict], list[dict]]:
    """Eval-DU forget/retain QA pairs: forget the target fact alone, or (white-box, the paper's section VII) a whole
    minimal deep-unlearning set of it (the smallest candidate, ties by sorted fact ids); retain every other fact."""
    from unlearn_tasks.deep_unlearning import evaluation_questions, load_evaldu

    kb = load_evaldu(kb_dir)
    target = kb.check_target(target)
    forget_ids = {target}
    if minimal_set:
        sets, _ = kb.candidate_minimal_sets(target)
        if sets:
            forget_ids = set(min(sets, key=lambda s: (len(s), sorted(s))))
    forget, retain = [], []
    for q in evaluation_questions(kb):
        pair = {"question": q["question"], "answer": q["answer"]}
        (forget if q["kind"] == "relationship" and q["index"] in forget_ids else retain).append(pair)
    return forget, retain


def load_texts(split: str, dataset: str, data_dir: str | None = None, default_config: str = "raw") -> list[dict]:
    """Raw-text records (``text``) of one split, ``split`` or ``config/split`` (default config ``raw``, e.g.
    ``forget``, ``retain1``, ``scal/forget_2``), through the shared loader (Hub parquet or local JSON)."""
    config, _, name = split.rpartition("/")
    rows = load_split(dataset, config or default_config, (name,), ("text",), data_dir, prefer_parquet=True)
    return [{"text": str(r["text"])} for r in rows]


class TextForgetRetainDataset(Dataset):
    """Raw-text unlearning data: one item per forget chunk (:func:`unlearn_tasks.prompts.encode_text`), paired with
    a retain chunk (cycled with a seeded permutation)."""

    def __init__(self, forget: list[dict], retain: list[dict], tokenizer, seed: int = 0, max_length: int = 256) -> None:
        self.forget = [c for r in forget for c in encode_text(tokenizer, r["text"], max_length)]
        self.retain = [c for r in retain for c in encode_text(tokenizer, r["text"], max_length)]
        if not self.forget:
            raise ValueError("The forget corpus is empty.")
        if not self.retain:
            raise ValueError("The retain corpus is empty.")
        self.retain_order = list(range(len(self.retain)))
        random.Random(seed).shuffle(self.retain_order)

    def __len__(self) -> int:
        return len(self.forget)

    def __getitem__(self, i: int) -> dict[str, Any]:
        f, r = self.forget[i], self.retain[self.retain_order[i % len(self.retain)]]
        return {"forget": {"input_ids": f[0], "labels": f[1]}, "retain": {"input_ids": r[0], "labels": r[1]}}


class ForgetRetainDataset(Dataset):
    """One item per forget example (per alternate answer of it, when given); see the module docstring."""

    def __init__(self, forget: list[dict], retain: list[dict], tokenizer, idk_answers: list[str],
                 seed: int = 0, max_length: int = 256, alternates: list[list[str]] | None = None,
                 prompt: PromptFormat = PLAIN) -> None:
        if not forget:
            raise ValueError("The forget set is empty.")
        if not retain:
            raise ValueError("The retain set is empty.")
        rng = random.Random(seed)
        self.retain_order = list(range(len(retain)))
        rng.shuffle(self.retain_order)
        self.forget, self.retain, self.tokenizer = forget, retain, tokenizer
        # a record's own preferred answer (``preferred``: RWKU's fabricated biography or its refusal) wins over the
        # drawn refusal; the draw is made either way, so the pairing of the other parts does not depend on it
        drawn = [idk_answers[rng.randrange(len(idk_answers))] for _ in forget]
        self.idk = [str(f.get("preferred") or d) for f, d in zip(forget, drawn)]
        self.alt = [retain[rng.randrange(len(retain))]["answer"] for _ in forget]
        self.max_length, self.prompt = max_length, prompt
        if alternates is not None and len(alternates) != len(forget):
            raise ValueError(f"{len(alternates)} lists of alternate answers for {len(forget)} forget items.")
        self.alternates = alternates
        # (forget index, alternate answer or None) per example
        self.examples = ([(i, a) for i, alts in enumerate(alternates) for a in alts] if alternates is not None
                         else [(i, None) for i in range(len(forget))])

    def __len__(self) -> int:
        return len(self.examples)

    def used_retain(self) -> list[dict]:
        """The retain records the examples are paired with (all of them when there are as many examples)."""
        return [self.retain[i] for i in sorted({self.retain_order[k % len(self.retain)] for k in range(len(self))})]

    def without_answer(self) -> tuple[int, int]:
        """How many forget records and how many of the :meth:`used_retain` records keep no answer token once cut to
        ``max_length`` (the prompt, with its system turn, fills it): such an example trains on nothing."""

        def empty(records: list[dict]) -> int:
            return sum(all(label == -100 for label in self._enc(r["question"], r["answer"])["labels"])
                       for r in records)

        return empty(self.forget), empty(self.used_retain())

    def _enc(self, question: str, answer: str) -> dict[str, list[int]]:
        ids, labels = self.prompt.encode(self.tokenizer, question, answer, self.max_length)
        return {"input_ids": ids, "labels": labels}

    def __getitem__(self, k: int) -> dict[str, Any]:
        i, alternate = self.examples[k]
        f = self.forget[i]
        r = self.retain[self.retain_order[k % len(self.retain)]]
        item = {
            "forget": self._enc(f["question"], f["answer"]),
            "retain": self._enc(r["question"], r["answer"]),
            "forget_idk": self._enc(f["question"], self.idk[i]),
            "forget_random": self._enc(f["question"], self.alt[i]),
        }
        if alternate is not None:
            item["forget_alternate"] = self._enc(f["question"], alternate)
        return item


def pad_batch(items: list[dict[str, list[int]]], pad_token_id: int, hide_pad_token: bool = False) -> dict[str, torch.Tensor]:
    """Right-pad ``input_ids`` (pad token) and ``labels`` (-100); build the attention mask: the padding hidden, or with
    ``hide_pad_token`` every position holding the pad token (``input_ids != pad_token_id``, open-unlearning's
    collator: with pad = end of turn, the end-of-turn tokens inside the sequence too)."""
    width = max(len(x["input_ids"]) for x in items)
    ids = torch.full((len(items), width), pad_token_id, dtype=torch.long)
    labels = torch.full((len(items), width), -100, dtype=torch.long)
    mask = torch.zeros((len(items), width), dtype=torch.long)
    for row, x in enumerate(items):
        n = len(x["input_ids"])
        ids[row, :n] = torch.tensor(x["input_ids"])
        labels[row, :n] = torch.tensor(x["labels"])
        mask[row, :n] = 1
    if hide_pad_token:
        mask = (ids != pad_token_id).long()
    return {"input_ids": ids, "labels": labels, "attention_mask": mask}


class PairCollator:
    """Collates :class:`ForgetRetainDataset` (or :class:`TextForgetRetainDataset`) items into ``{part: padded batch}``
    (``hide_pad_token``: open-unlearning's attention mask, see :func:`pad_batch`)."""

    def __init__(self, pad_token_id: int, hide_pad_token: bool = False) -> None:
        self.pad_token_id, self.hide_pad_token = pad_token_id, hide_pad_token

    def __call__(self, features: list[dict]) -> dict[str, dict[str, torch.Tensor]]:
        return {part: pad_batch([f[part] for f in features], self.pad_token_id, self.hide_pad_token)
                for part in PARTS if part in features[0]}
