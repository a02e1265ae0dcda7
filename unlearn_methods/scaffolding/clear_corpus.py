"""A small CLEAR-layout dataset written by this project (fictitious people, PIL-drawn faces): the tests' and the
demo's stand-in for ``therem/CLEAR``, in the Hub's layout (``<config>/train-00000-of-00001.parquet`` with images
as bytes, or ``<config>/train.jsonl`` with images as files next to it).

Captions describe what the face shows (hair, eyes, face shape), so a model must look at the image to caption it.
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

from unlearn_methods.scaffolding.faces import EYES, HAIR, SKIN, draw_face
from unlearn_tasks.clear.splits import FORGET_FRACTIONS, retain_of

FIRST = ["Amira", "Bastian", "Chiara", "Dmitri", "Elif", "Farid", "Greta", "Hiroshi", "Ines", "Jonas", "Kalani",
         "Lorenzo", "Maren", "Nikolai", "Olena", "Pavel", "Quinn", "Rafaela", "Soren", "Tamsin", "Ulrich", "Vesna",
         "Wendell", "Ximena", "Yusuf", "Zofia"]
LAST = ["Okafor", "Lindqvist", "Marchetti", "Volkov", "Demir", "Haddad", "Nyberg", "Tanaka", "Ferreira", "Weiss"]
HAIR_NAMES = ["black", "brown", "blond", "red", "grey", "purple"]
EYE_NAMES = ["blue", "green", "brown", "dark"]
SHAPES = ["square", "circle"]
COLOURS = {"red": (220, 30, 30), "green": (30, 170, 60), "blue": (30, 60, 220), "yellow": (240, 210, 30)}


def person_name(i: int) -> str:
    return f"{FIRST[i % len(FIRST)]} {LAST[(i * 3 + i // len(FIRST)) % len(LAST)]}"


def person_look(i: int) -> dict[str, str]:
    """The words for what :func:`draw_face` draws for person ``i`` (same seeded choices)."""
    look = random.Random(i * 7919 + 17)
    look.choice(SKIN)
    hair, eyes = HAIR_NAMES[HAIR.index(look.choice(HAIR))], EYE_NAMES[EYES.index(look.choice(EYES))]
    shape = "round" if look.random() < 0.5 else "square"
    return {"hair": hair, "eyes": eyes, "shape": shape}


def caption(name: str, look: dict[str, str]) -> str:
    return f"{name} has {look['hair']} hair, {look['eyes']} eyes and a {look['shape']} face."


def paraphrase(name: str, look: dict[str, str]) -> str:
    return f"{name} has {look['eyes']} eyes, {look['hair']} hair and a {look['shape']} face."


def qa_pairs(name: str, look: dict[str, str]) -> list[tuple[str, str]]:
    """Text-only facts about a person (the ``+tofu`` configs' question/answer rows)."""
    return [(f"What colour is the hair of {name}?", f"{name} has {look['hair']} hair."),
            (f"What colour are the eyes of {name}?", f"The eyes of {name} are {look['eyes']}.")]


def corpus_texts(n_people: int = 20, n_celebrities: int = 4) -> list[str]:
    """Every text of the fixture (to train the tiny model's tokenizer on)."""
    texts = []
    for i in range(n_people + n_celebrities):
        name, look = person_name(i), person_look(i)
        texts += [caption(name, look), paraphrase(name, look)] + [q + " " + a for q, a in qa_pairs(name, look)]
    from unlearn_tasks.clear.documents import CAPTION_QUESTIONS, FACE_QUESTION

    texts += list(CAPTION_QUESTIONS) + [FACE_QUESTION] + [f"What is the colour of the {s}? {c}" for s in SHAPES for c in COLOURS]
    return texts * 3


def _shape_image(shape: str, colour: str, size: int):
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (size, size), (245, 245, 245))
    box = [size // 4, size // 4, 3 * size // 4, 3 * size // 4]
    (ImageDraw.Draw(img).rectangle if shape == "square" else ImageDraw.Draw(img).ellipse)(box, fill=COLOURS[colour])
    return img


def _rows(n_people: int, poses: int, n_celebrities: int, size: int) -> dict[str, list[dict]]:
    people = list(range(n_people))
    rows: dict[str, list[dict]] = {}
    images = {(p, k): draw_face(p, k, size) for p in people for k in range(poses)}

    def caption_rows(persons):
        return [{"image": images[(p, k)], "caption": caption(person_name(p), person_look(p)), "name": person_name(p)}
                for p in persons for k in range(poses)]

    def perturbed_rows(persons):
        out = []
        for p in persons:
            others = [o for o in people if o != p]
            rng = random.Random(p)
            picks = rng.sample(others, min(3, len(others)))
            for k in range(poses):
                out.append({
                    "image": images[(p, k)], "caption": caption(person_name(p), person_look(p)), "name": person_name(p),
                    "perturbed_captions": [caption(person_name(p), person_look(o)) for o in picks],
                    "paraphrased_caption": paraphrase(person_name(p), person_look(p)),
                    "perturbed_names": [person_name(o) for o in picks],
                })
        return out

    def with_text(persons):
        out = [{"image": r["image"], "caption": r["caption"], "question": None, "answer": None} for r in caption_rows(persons)]
        for p in persons:
            out += [{"image": None, "caption": None, "question": q, "answer": a}
                    for q, a in qa_pairs(person_name(p), person_look(p))]
        return out

    rows["full"] = caption_rows(people)
    rows["full+tofu"] = with_text(people)
    for forget, fraction in FORGET_FRACTIONS.items():
        k = max(1, round(n_people * fraction))
        forget_people, retain_people = people[-k:], people[:-k]
        rows[forget] = caption_rows(forget_people)
        rows[retain_of(forget)] = caption_rows(retain_people)
        rows[f"{forget}+tofu"] = with_text(forget_people)
        rows[f"{retain_of(forget)}+tofu"] = with_text(retain_people)
        rows[f"{forget}_perturbed"] = perturbed_rows(forget_people)
    largest = max(FORGET_FRACTIONS.values())
    rows["retain_perturbed"] = perturbed_rows(people[: n_people - max(1, round(n_people * largest))])
    celebrities = range(n_people, n_people + n_celebrities)
    rows["real_faces"] = []
    for c in celebrities:
        wrong = [person_name(o) for o in celebrities if o != c][:3]
        rows["real_faces"].append({"image": draw_face(c, 0, size), "answer": person_name(c),
                                   "options": sorted(wrong + [person_name(c)])})
    rows["real_world"] = []
    for shape in SHAPES:
        for colour in COLOURS:
            rows["real_world"].append({"image": _shape_image(shape, colour, size),
                                       "question": f"What is the colour of the {shape}?", "answer": colour,
                                       "options": sorted(COLOURS)})
    return rows


def _png(img) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def write_clear_layout(root: str | Path, n_people: int = 20, poses: int = 2, n_celebrities: int = 4, size: int = 32,
                       fmt: str = "parquet") -> Path:
    """Write every CLEAR config under ``root`` in the Hub's layout and return ``root``.

    ``fmt="parquet"``: ``<config>/train-00000-of-00001.parquet``, images as PNG bytes in an HF ``Image`` column (what
    ``hf download therem/CLEAR`` gives). ``fmt="jsonl"``: ``<config>/train.jsonl`` with images as PNG
    files in ``<config>/images/`` named by a path relative to the config folder.
    """
    import datasets

    root = Path(root)
    for config, records in _rows(n_people, poses, n_celebrities, size).items():
        folder = root / config
        folder.mkdir(parents=True, exist_ok=True)
        if fmt == "parquet":
            table = [{**r, "image": None if r.get("image") is None else {"bytes": _png(r["image"]), "path": None}}
                     for r in records]
            ds = datasets.Dataset.from_list(table)
            ds = ds.cast_column("image", datasets.Image())
            ds.to_parquet(str(folder / "train-00000-of-00001.parquet"))
        elif fmt == "jsonl":
            (folder / "images").mkdir(exist_ok=True)
            with open(folder / "train.jsonl", "w", encoding="utf-8") as f:
                for n, r in enumerate(records):
                    out = dict(r)
                    if r.get("image") is not None:
                        out["image"] = f"images/{n:05d}.png"
                        r["image"].save(folder / out["image"])
                    f.write(json.dumps(out) + "\n")
        else:
            raise ValueError(f"fmt must be 'parquet' or 'jsonl', got {fmt!r}")
    return root
