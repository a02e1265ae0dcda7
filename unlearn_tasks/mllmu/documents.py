"""The documents of one MLLMU-Bench task (one forget size, one mode: image+text or text only): every question of the
forget, test, retain and celebrity sets for the three evaluations, each with its full prompt (few-shot included) and
the keys of its images (the photos stay in one store, not copied into every document).

| set | read from | people | few-shot (classification / cloze) |
|---|---|---|---|
| forget | ``forget_N`` | all | yes / yes |
| test | ``Test_Set`` | the forget people (one of their new photos drawn per row) | yes / yes |
| retain | ``retain_{100-N}`` | all | yes / yes |
| celebrity | ``Retain_Set`` | all | no / yes (from ``Full_Set``: none unless IDs coincide) |

Few-shot (the release's ``evaluate_classification`` / ``evaluate_fill_in_the_blank``): ``k`` people are drawn
(``random.sample``) from the evaluated set's IDs (``release`` mode) and every question of theirs in ``Full_Set`` of
the mode's type becomes a few-shot block, in ``Full_Set`` row order; those questions (same person, same position)
are not scored. ``clean`` mode draws them from the people of no forget split (``Full_Set`` less ``forget_15``),
the same for every set. Draws use ``random.Random(seed)``, one per set and evaluation, consumed as the release
consumes Python's global generator (the draw of people, then one photo per test-set row).
"""

from __future__ import annotations

import itertools
import os
import random
from typing import Any

from unlearn_tasks.dataset_loader import DataError
from unlearn_tasks.mllmu import prompts
from unlearn_tasks.mllmu.data import load_mllmu
from unlearn_tasks.mllmu.splits import (
    CELEBRITY_SET,
    FORGET_PERCENTS,
    FULL_SET,
    HUB_ID,
    SETS,
    TEST_SET,
    forget_config,
    retain_config,
)

PARTS = ("classification", "cloze", "generation")
MODES = ("release", "clean")
MODALITIES = ("image", "text")
IMAGE_TYPE = "Image_Textual"
#: The release's question kinds of each mode: classification lists, and the ``Type`` of cloze / generation items.
CLASSIFICATION_LIST = {"image": "Image_Textual_Questions", "text": "Pure_Text_Questions"}
CLOZE_TYPE = {"image": "Image_Textual", "text": "Pure_Text"}
#: The sets whose prompts carry the few-shot blocks (the release's ``mode in [...]`` checks).
FEWSHOT_SETS = {"classification": ("forget", "retain", "test"), "cloze": ("forget", "retain", "test", "celebrity")}


class Store:
    """The photos of a run, by key (``<config>/<ID>`` or ``Test_Set/<ID>/<k>``)."""

    def __init__(self) -> None:
        self.images: dict[str, Any] = {}

    def add(self, key: str, image) -> str:
        self.images.setdefault(key, image)
        return key


def _few_shot(full_by_id: dict[str, dict], ids: list[str], part: str, modality: str, store: Store):
    """(few-shot text, few-shot image keys, {ID: skipped question positions}) from the chosen people's Full_Set rows,
    in Full_Set order."""
    shots, keys, skip = "", [], {}
    image = modality == "image"
    for row in full_by_id.values():
        if row["ID"] not in ids:
            continue
        skip[row["ID"]] = set()
        if part == "classification":
            for n, q in enumerate(row["Classification_Task"].get(CLASSIFICATION_LIST[modality]) or []):
                shots += prompts.classification_shot(q["Question"], q["Options"], q["Correct_Answer"], image)
                skip[row["ID"]].add(n)
                if image:
                    keys.append(store.add(f"{FULL_SET}/{row['ID']}", row["image"]))
        else:
            for n, q in enumerate(row["Mask_Task"] or []):
                if q["Type"] == CLOZE_TYPE[modality]:
                    shots += prompts.cloze_shot(q["Question"], q["Ground_Truth"], image)
                    skip[row["ID"]].add(n)
                    if image:
                        keys.append(store.add(f"{FULL_SET}/{row['ID']}", row["image"]))
    return shots, keys, skip


def _draw_people(rng: random.Random, population: list[str], k: int, where: str) -> list[str]:
    if k > len(population):
        raise DataError(f"MLLMU-Bench {where}: {k} few-shot people are drawn from {len(population)} (the release's "
                        "random.sample fails here too); pass fewer (classification_shots / cloze_shots) or a larger set.")
    return rng.sample(population, k)


def set_documents(set_name: str, part: str, modality: str, rows: list[dict], full_by_id: dict[str, dict],
                  shots_people: int, store: Store, seed: int, clean_pool: list[str] | None = None,
                  population: list[str] | None = None) -> list[dict]:
    """The documents of one set and evaluation, in the release's order (rows, then questions); the few-shot people
    are drawn from ``population`` (default: the rows' IDs in order; the test set: the forget set's)."""
    rng = random.Random(seed)
    image = modality == "image"
    config = rows[0]["_config"] if rows else set_name
    shots, shot_keys, skip = "", [], {}
    if part in FEWSHOT_SETS:
        ids = population if population is not None else list(dict.fromkeys(r["ID"] for r in rows))
        people = _draw_people(rng, clean_pool if clean_pool is not None else ids, shots_people, f"{set_name} {part}")
        shots, shot_keys, skip = _few_shot(full_by_id, people, part, modality, store)
        if set_name not in FEWSHOT_SETS[part]:
            shots, shot_keys = "", []
    docs = []
    for row in rows:
        if set_name == "test":
            k = rng.randrange(len(row["images"])) if row["images"] else 0
            key = store.add(f"{TEST_SET}/{row['ID']}/{k}", row["images"][k])
        else:
            key = store.add(f"{config}/{row['ID']}", row["image"])
        images = [*shot_keys, key] if image else []
        skipped = skip.get(row["ID"], set())
        if part == "classification":
            for n, q in enumerate(row["Classification_Task"].get(CLASSIFICATION_LIST[modality]) or []):
                if n in skipped:
                    continue
                prompt = prompts.classification_prompt(shots, q["Question"], q["Options"], image)
                docs.append(_doc(set_name, part, row["ID"], n, prompt, images, q["Correct_Answer"], q["Options"]))
        elif part == "cloze":
            for n, q in enumerate(row["Mask_Task"] or []):
                if q["Type"] != CLOZE_TYPE[modality] or n in skipped:
                    continue
                prompt = prompts.cloze_prompt(shots, q["Question"], image)
                docs.append(_doc(set_name, part, row["ID"], n, prompt, images, q["Ground_Truth"]))
        else:
            for n, q in enumerate(row["Generation_Task"] or []):
                if (q["Type"] == IMAGE_TYPE) != image:  # the release: Image_Textual, else text
                    continue
                prompt = prompts.generation_prompt(q["Question"], image)
                docs.append(_doc(set_name, part, row["ID"], n, prompt, [key] if image else [], q["Ground_Truth"]))
    return docs


def _doc(set_name: str, part: str, person: str, index: int, prompt: str, images: list[str], answer: str,
         options: dict | None = None) -> dict:
    return {"id": f"{set_name}/{part}/{person}/{index}", "set": set_name, "part": part, "person": person,
            "index": index, "prompt": prompt, "images": list(images), "answer": str(answer),
            "letters": "".join(options) if options else ""}


def set_rows(forget_split: str, data_dir: str | os.PathLike | None = None, dataset_path: str = HUB_ID,
             sets: list[str] | None = None, clean_pool: bool = True) -> tuple[dict[str, list[dict]], dict[str, dict], list[str], list[str]]:
    """Rows per set, ``Full_Set`` by ID, the IDs of no forget split (the clean few-shot pool, with ``clean_pool``),
    the forget IDs."""
    wanted = [s for s in SETS if sets is None or s in sets]
    full = load_mllmu(FULL_SET, data_dir, dataset_path)
    full_by_id = {r["ID"]: r for r in full}
    forget = load_mllmu(forget_config(forget_split), data_dir, dataset_path)
    forget_ids = [r["ID"] for r in forget]
    missing = list(dict.fromkeys(i for i in forget_ids if i not in full_by_id))
    if missing:
        raise DataError(f"MLLMU-Bench {forget_config(forget_split)}: IDs {missing[:5]} are not in {FULL_SET} (a "
                        "partial or mixed copy? download the whole dataset again).")
    out: dict[str, list[dict]] = {}
    for name in wanted:
        if name == "forget":
            rows, config = forget, forget_config(forget_split)
        elif name == "retain":
            rows, config = load_mllmu(retain_config(forget_split), data_dir, dataset_path), retain_config(forget_split)
        elif name == "celebrity":
            rows, config = load_mllmu(CELEBRITY_SET, data_dir, dataset_path), CELEBRITY_SET
        else:
            test = load_mllmu(TEST_SET, data_dir, dataset_path)
            keep = set(forget_ids)
            rows, config = [r for r in test if r["ID"] in keep], TEST_SET
            if not rows:
                raise DataError(f"MLLMU-Bench {TEST_SET} holds none of the {len(forget_ids)} people of "
                                f"{forget_config(forget_split)}.")
        out[name] = [{**r, "_config": config} for r in rows]
    never: list[str] = []
    if clean_pool:
        largest = max(FORGET_PERCENTS, key=FORGET_PERCENTS.get)
        forgotten = {r["ID"] for r in load_mllmu(forget_config(largest), data_dir, dataset_path)}
        never = [i for i in full_by_id if i not in forgotten]
    return out, full_by_id, never, list(dict.fromkeys(forget_ids))


def build_docs(forget_split: str, modality: str, dataset_path: str = HUB_ID, data_dir: str | os.PathLike | None = None,
               sets: list[str] | None = None, parts: list[str] | None = None, mode: str = "release", seed: int = 0,
               classification_shots: int = 1, cloze_shots: int = 2,
               max_items_per_split: int | None = None) -> tuple[list[dict], dict[str, Any]]:
    """Every document of a task and the image store; (set, evaluation) groups interleaved round-robin so that
    ``--limit N`` keeps every group."""
    if modality not in MODALITIES:
        raise ValueError(f"modality must be one of {MODALITIES}, got {modality!r}")
    rows, full_by_id, never_forgotten, forget_ids = set_rows(forget_split, data_dir, dataset_path, sets,
                                                             clean_pool=mode == "clean")
    store = Store()
    groups = []
    for name, set_rows_ in rows.items():
        for part in [p for p in PARTS if parts is None or p in parts]:
            k = {"classification": classification_shots, "cloze": cloze_shots}.get(part, 0)
            docs = set_documents(name, part, modality, set_rows_, full_by_id, k, store, seed,
                                 never_forgotten if mode == "clean" else None, forget_ids if name == "test" else None)
            groups.append(docs[:max_items_per_split] if max_items_per_split else docs)
    docs = [d for group in itertools.zip_longest(*groups) for d in group if d is not None]
    used = {k for d in docs for k in d["images"]}
    return docs, {k: v for k, v in store.images.items() if k in used}
