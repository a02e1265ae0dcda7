"""A small MLLMU-Bench-layout dataset written by this project (fictitious people, PIL-drawn faces): the tests' stand-in
for ``MLLMMU/MLLMU-Bench``, in the Hub's layout: ``<config>/train-0000k-of-0000n.parquet`` for ``Full_Set``,
``forget_5`` / ``retain_95`` (and 10 / 15), ``Retain_Set`` (the celebrities) and ``Test_Set`` (several photos per
person in ``images``, paraphrased questions; written as two shards). Nothing here comes from the release's data.
"""

from __future__ import annotations

import io
import random
from pathlib import Path

from unlearn_methods.scaffolding.clear_corpus import person_name
from unlearn_methods.scaffolding.faces import draw_face
from unlearn_tasks.mllmu.splits import CELEBRITY_SET, FORGET_PERCENTS, FULL_SET, TEST_SET, forget_config, retain_config

CITIES = ["Lisbon", "Oslo", "Quito", "Hanoi", "Dakar", "Perth", "Riga", "Cusco", "Tunis", "Kyoto", "Lyon", "Accra"]
JOBS = ["baker", "pilot", "surgeon", "architect", "violinist", "chemist", "sculptor", "farmer", "diplomat", "editor"]
HOBBIES = ["chess", "rowing", "pottery", "birdwatching", "fencing", "origami", "sailing", "juggling"]
CELEBRITY_NAMES = ["Marlow Quent", "Ysolde Brask", "Tobiah Renn", "Ondine Valk"]


def person_facts(i: int, celebrity: bool = False) -> dict[str, str]:
    rng = random.Random(i * 613 + (7 if celebrity else 1))
    name = CELEBRITY_NAMES[i % len(CELEBRITY_NAMES)] if celebrity else person_name(i)
    return {"name": name, "city": rng.choice(CITIES), "job": rng.choice(JOBS), "hobby": rng.choice(HOBBIES)}


def _options(rng: random.Random, answer: str, pool: list[str]) -> tuple[dict[str, str], str]:
    wrong = rng.sample([p for p in pool if p != answer], 3)
    letter = "ABCD"[rng.randrange(4)]
    values = wrong[: "ABCD".index(letter)] + [answer] + wrong["ABCD".index(letter):]
    return dict(zip("ABCD", values)), letter


def _tasks(f: dict[str, str], rng: random.Random, paraphrased: bool) -> dict:
    """The three task columns of one profile; ``paraphrased`` words the questions as the test set does."""
    who = "this person" if paraphrased else "the person in the image"
    name = f["name"]
    cls_image, cls_text = [], []
    for key, pool, q in (("job", JOBS, f"What is the profession of {who}?"), ("city", CITIES, f"In which city was {who} born?")):
        options, letter = _options(rng, f[key], pool)
        cls_image.append({"Correct_Answer": letter, "Options": options, "Question": q})
    for key, pool, q in (("hobby", HOBBIES, f"Which hobby does {name} enjoy?"), ("job", JOBS, f"What does {name} do for work?")):
        options, letter = _options(rng, f[key], pool)
        cls_text.append({"Correct_Answer": letter, "Options": options, "Question": q})
    mask = [{"Question": f"{'This person' if paraphrased else 'The person in the image'} works as a __.",
             "Ground_Truth": f["job"], "Type": "Image_Textual"},
            {"Question": f"{name} was born in __.", "Ground_Truth": f["city"], "Type": "Pure_Text"},
            {"Question": f"In free time, {who} enjoys __.", "Ground_Truth": f["hobby"], "Type": "Image_Textual"},
            {"Question": f"{name} enjoys __ on weekends.", "Ground_Truth": f["hobby"], "Type": "Pure_Text"}]
    generation = [{"Question": f"Where was {who} born?", "Ground_Truth": f"This person was born in {f['city']}.",
                   "Type": "Image_Textual"},
                  {"Question": f"What does {name} do for a living?", "Ground_Truth": f"{name} works as a {f['job']}.",
                   "Type": "Pure_Text"}]
    return {"Classification_Task": {"Image_Textual_Questions": cls_image, "Pure_Text_Questions": cls_text},
            "Mask_Task": mask, "Generation_Task": generation}


def _png(img) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def _profile_rows(n_people: int, n_celebrities: int, test_photos: int, size: int) -> dict[str, list[dict]]:
    rows: dict[str, list[dict]] = {}
    full = []
    for i in range(n_people):
        f = person_facts(i)
        full.append({"image": {"bytes": _png(draw_face(i, 0, size)), "path": None}, "ID": f"{i + 1}",
                     "biography": f"{f['name']} is a {f['job']} from {f['city']}.",
                     "question": f"What does {f['name']} do?", "answer": f"{f['name']} works as a {f['job']}.",
                     **_tasks(f, random.Random(i), paraphrased=False)})
    rows[FULL_SET] = full
    for split, pct in FORGET_PERCENTS.items():
        k = max(1, round(n_people * pct / 100))
        rows[forget_config(split)], rows[retain_config(split)] = full[-k:], full[:-k]
    rows[TEST_SET] = [{"ID": r["ID"], "images": [{"bytes": _png(draw_face(i, 1 + p, size)), "path": None}
                                                 for p in range(test_photos)],
                       **_tasks(person_facts(i), random.Random(1000 + i), paraphrased=True)}
                      for i, r in enumerate(full)]
    rows[CELEBRITY_SET] = [{"image": {"bytes": _png(draw_face(100 + c, 0, size)), "path": None}, "ID": f"c{c + 1}",
                            **_tasks(person_facts(c, celebrity=True), random.Random(500 + c), paraphrased=False)}
                           for c in range(n_celebrities)]
    return rows


def write_mllmu_layout(root: str | Path, n_people: int = 20, n_celebrities: int = 3, test_photos: int = 2,
                       size: int = 16) -> Path:
    """Write the MLLMU-Bench configs under ``root`` in the Hub's layout and return ``root``."""
    import datasets

    root = Path(root)
    for config, records in _profile_rows(n_people, n_celebrities, test_photos, size).items():
        folder = root / config
        folder.mkdir(parents=True, exist_ok=True)
        ds = datasets.Dataset.from_list(records)
        if "image" in ds.column_names:
            ds = ds.cast_column("image", datasets.Image())
        else:
            ds = ds.cast_column("images", datasets.Sequence(datasets.Image()))
        shards = 2 if config == TEST_SET else 1
        for k in range(shards):
            ds.shard(shards, k, contiguous=True).to_parquet(str(folder / f"train-{k:05d}-of-{shards:05d}.parquet"))
    return root
