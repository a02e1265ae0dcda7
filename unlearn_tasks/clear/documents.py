"""The documents of one CLEAR visual evaluation (the release's six ``eval_*`` tasks of one forget size, in one list).

| set | config | question | answer | paraphrased | perturbed |
|---|---|---|---|---|---|
| forget_caption | ``forgetXX_perturbed`` | a caption question (seeded draw) | caption | paraphrased_caption | perturbed_captions |
| retain_caption | ``retain_perturbed`` | a caption question | caption | paraphrased_caption | perturbed_captions |
| forget_facerec | ``forgetXX_perturbed`` | :data:`FACE_QUESTION` | name | name | perturbed_names |
| retain_facerec | ``retain_perturbed`` | :data:`FACE_QUESTION` | name | name | perturbed_names |
| real_faces | ``real_faces`` | :data:`FACE_QUESTION` | answer | answer | options (less the answer, unless parity) |
| real_world | ``real_world`` | question | answer | answer | options (less the answer, unless parity) |

The sets are interleaved round-robin so that ``--limit N`` keeps every set.
"""

from __future__ import annotations

import itertools
import os
import random
from typing import Any

from unlearn_tasks.clear.data import load_clear
from unlearn_tasks.clear.splits import HUB_ID, RELEASE_CAP
from unlearn_tasks.prompts import question_prompt

IMAGE_PLACEHOLDER = "<image>"
FACE_QUESTION = "The name of the person on the image is"
#: Caption questions. The first two are quoted in the release's config; the other seven are ours (the release draws
#: one of nine at random per item; we draw with ``random.Random(seed)`` in item order).
CAPTION_QUESTIONS = (
    "What can you see in this picture?",
    "Tell me about the content of this image",
    "Describe the person in this image.",
    "What does this picture show?",
    "Give a caption for this image.",
    "Who is in this photo and what do they look like?",
    "Describe what you see.",
    "What is shown in the image?",
    "Write a short description of this picture.",
)
SETS = ("forget_caption", "retain_caption", "forget_facerec", "retain_facerec", "real_faces", "real_world")
CAPTION_SETS = ("forget_caption", "retain_caption")


def image_prompt(question: str) -> str:
    """The plain prompt: the image, then TOFU's ``Question: ...\\nAnswer:`` (the answer follows after a space)."""
    return f"{IMAGE_PLACEHOLDER}\n{question_prompt(question)}"


def _options(answer: str, options: list, parity: bool) -> list[str]:
    opts = [str(o) for o in options]
    return opts if parity else [o for o in opts if o.strip() != answer.strip()]


def build_docs(forget_split: str, dataset_path: str = HUB_ID, data_dir: str | os.PathLike | None = None,
               sets: list[str] | None = None, max_items_per_split: int | None = None, parity: bool = False,
               seed: int = 0) -> list[dict[str, Any]]:
    """All documents for ``forget_split``; ``parity`` applies the release's 300-item cap and keeps the options as
    given (the release scores every option as a perturbed answer)."""
    cap = RELEASE_CAP if parity and max_items_per_split is None else max_items_per_split
    wanted = [s for s in SETS if sets is None or s in sets]
    cache: dict[str, list[dict]] = {}

    def rows(config: str) -> list[dict]:
        if config not in cache:
            cache[config] = load_clear(config, data_dir, dataset_path)
        return cache[config][:cap] if cap else cache[config]

    per_set = []
    for name in wanted:
        docs = []
        if name in ("forget_caption", "retain_caption", "forget_facerec", "retain_facerec"):
            config = f"{forget_split}_perturbed" if name.startswith("forget") else "retain_perturbed"
            rng = random.Random(seed)
            for i, r in enumerate(rows(config)):
                if name.endswith("caption"):
                    docs.append(_doc(name, i, rng.choice(CAPTION_QUESTIONS), r["caption"], r["paraphrased_caption"],
                                     r["perturbed_captions"], r["image"]))
                else:
                    docs.append(_doc(name, i, FACE_QUESTION, r["name"], r["name"], r["perturbed_names"], r["image"]))
        elif name == "real_faces":
            docs = [_doc(name, i, FACE_QUESTION, r["answer"], r["answer"], _options(r["answer"], r["options"], parity),
                         r["image"]) for i, r in enumerate(rows("real_faces"))]
        else:
            docs = [_doc(name, i, r["question"], r["answer"], r["answer"], _options(r["answer"], r["options"], parity),
                         r["image"]) for i, r in enumerate(rows("real_world"))]
        empty = [d["id"] for d in docs if not d["perturbed"]]
        if empty:
            raise ValueError(f"CLEAR {name}: items {empty[:5]} have no perturbed answers / options.")
        per_set.append(docs)
    return [d for group in itertools.zip_longest(*per_set) for d in group if d is not None]


def _doc(set_name: str, index: int, question: str, answer: str, paraphrased: str, perturbed: list, image) -> dict:
    if image is None:
        raise ValueError(f"CLEAR {set_name} item {index} has no image.")
    return {"id": f"{set_name}/{index}", "split": set_name, "index": index, "question": str(question),
            "answer": str(answer), "paraphrased": str(paraphrased), "perturbed": [str(p) for p in perturbed],
            "image": image}


def load_docs(forget_split: str = "forget10", dataset_path: str | None = None, data_dir: str | None = None,
              sets: list[str] | None = None, max_items_per_split: int | None = None, mode: str = "default",
              seed: int = 0, **_: Any):
    """lm-eval ``custom_dataset`` entry point (metadata arrives as keywords)."""
    import datasets

    docs = build_docs(forget_split, dataset_path or HUB_ID, data_dir, sets, max_items_per_split, mode == "parity", seed)
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})
