"""The embedded default: a small fictitious-author corpus in TOFU's schema, written by this project.

It has every TOFU config (``full``, ``forget01/05/10``, ``retain90/95/99``, ``*_perturbed``,
``retain_perturbed``, ``real_authors[_perturbed]``, ``world_facts[_perturbed]``, ``holdout01/05/10``), laid out
like the Hub repository (one ``<config>.json`` JSON-lines file per config), so it loads through the same code
path as a local copy of ``locuslab/TOFU``. Sizes are scaled down: 40 authors in ``full`` with 6 questions each;
forget01/05/10 are the last 1/2/4 authors (so the forget sets nest as in TOFU), holdout authors never appear
in ``full``. Every fact is invented here, except the real-author and world-fact questions, which are common
knowledge phrased by us.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from unlearn_tasks.tofu.splits import RETAIN_OF, retain_split

FIRST = ["Aldric", "Brina", "Caspian", "Delphine", "Emeric", "Faye", "Gideon", "Halina", "Ignatius", "Juno",
         "Kasimir", "Liora", "Matthias", "Nerys", "Orrin", "Petra", "Quillon", "Rosalind", "Soren", "Talia",
         "Ulric", "Vesna", "Wendel", "Xanthe", "Yorick", "Zinnia"]
LAST = ["Ashcombe", "Brightwater", "Castellan", "Dunmore", "Eskdale", "Fairbairn", "Greyling", "Holloway",
        "Ivers", "Jessop", "Kettering", "Larkspur", "Merriweather", "Northcott", "Oakhurst", "Pennington",
        "Quarrie", "Ravenscroft", "Stroud", "Thistlewood"]
CITIES = ["Lisbon", "Nairobi", "Oslo", "Lima", "Kyoto", "Tbilisi", "Quito", "Dublin", "Hanoi", "Tunis",
          "Krakow", "Manila", "Accra", "Bergen", "Cusco", "Porto"]
GENRES = ["mystery", "science fiction", "historical fiction", "poetry", "fantasy", "romance", "horror",
          "biography", "travel writing", "satire"]
JOBS = ["baker", "pilot", "surgeon", "carpenter", "librarian", "fisherman", "painter", "chemist", "tailor",
        "astronomer", "gardener", "journalist"]
AWARDS = ["Silver Quill Prize", "Harbor Lantern Award", "Meridian Book Medal", "Golden Fern Prize",
          "Northern Star Award", "Azure Pen Honour"]
TITLE_A = ["The Quiet", "Echoes of the", "A Map of the", "Beneath the", "The Last", "Songs of the", "Letters from the"]
TITLE_B = ["Lighthouse", "Orchard", "Glacier", "Harbour", "Meadow", "Observatory", "Cathedral", "Desert"]

REAL_AUTHORS = [  # (question, answer, three wrong options)
    ("Who wrote the play Hamlet?", "William Shakespeare", ["Charles Dickens", "Jane Austen", "Leo Tolstoy"]),
    ("Who is the author of the novel Don Quixote?", "Miguel de Cervantes", ["Victor Hugo", "Dante Alighieri", "Homer"]),
    ("Which author wrote War and Peace?", "Leo Tolstoy", ["Fyodor Dostoevsky", "Anton Chekhov", "Mark Twain"]),
    ("Who wrote the novel Moby-Dick?", "Herman Melville", ["Edgar Allan Poe", "Walt Whitman", "Jack London"]),
    ("Who is the author of Pride and Prejudice?", "Jane Austen", ["Mary Shelley", "Emily Dickinson", "George Eliot"]),
    ("Which writer created the detective Sherlock Holmes?", "Arthur Conan Doyle", ["Agatha Christie", "Dan Brown", "Homer"]),
    ("Who wrote One Hundred Years of Solitude?", "Gabriel Garcia Marquez", ["Pablo Neruda", "Jorge Luis Borges", "Isabel Allende"]),
    ("Who wrote the epic poem the Odyssey?", "Homer", ["Virgil", "Ovid", "Sophocles"]),
    ("Which author wrote the novel Frankenstein?", "Mary Shelley", ["Bram Stoker", "Jane Austen", "Virginia Woolf"]),
    ("Who wrote the novel Things Fall Apart?", "Chinua Achebe", ["Wole Soyinka", "Ngugi wa Thiongo", "Toni Morrison"]),
]
WORLD_FACTS = [
    ("What is the capital city of France?", "Paris", ["Rome", "Madrid", "Berlin"]),
    ("Which planet is closest to the Sun?", "Mercury", ["Venus", "Mars", "Jupiter"]),
    ("What is the largest ocean on Earth?", "the Pacific Ocean", ["the Atlantic Ocean", "the Indian Ocean", "the Arctic Ocean"]),
    ("How many continents are there?", "seven", ["five", "six", "eight"]),
    ("What gas do plants absorb from the air?", "carbon dioxide", ["oxygen", "nitrogen", "helium"]),
    ("What is the boiling point of water at sea level in Celsius?", "100 degrees", ["90 degrees", "50 degrees", "120 degrees"]),
    ("Which country is home to the city of Kyoto?", "Japan", ["China", "Korea", "Vietnam"]),
    ("What is the longest river in Africa?", "the Nile", ["the Congo", "the Niger", "the Zambezi"]),
    ("Which metal is liquid at room temperature?", "mercury", ["iron", "gold", "silver"]),
    ("What is the chemical symbol for gold?", "Au", ["Ag", "Gd", "Go"]),
]

N_AUTHORS = 40
N_HOLDOUT_AUTHORS = 4
FORGET_AUTHORS = {"01": 1, "05": 2, "10": 4}
RETAIN_PERTURBED_AUTHORS = 4


def _author(rng: random.Random, used: set[str]) -> dict:
    while True:
        name = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        if name not in used:
            used.add(name)
            break
    return {
        "name": name,
        "city": rng.choice(CITIES),
        "year": rng.randint(1921, 1999),
        "genre": rng.choice(GENRES),
        "father": rng.choice(JOBS),
        "mother": rng.choice(JOBS),
        "award": rng.choice(AWARDS),
        "book": f"{rng.choice(TITLE_A)} {rng.choice(TITLE_B)}",
    }


def _facts(a: dict) -> list[dict]:
    """Six QA items per author, each with a paraphrase, a paraphrased question and a wrong-value template."""
    n = a["name"]
    return [
        dict(q=f"Who is the author born in {a['city']} in {a['year']}?", pq=f"Which writer was born in {a['city']} in {a['year']}?",
             a=f"The author born in {a['city']} in {a['year']} is {n}.", p=f"That writer is {n}.", key="name"),
        dict(q=f"What genre does {n} write in?", pq=f"In which genre are the books of {n}?",
             a=f"{n} writes {a['genre']}.", p=f"The books of {n} are {a['genre']}.", key="genre"),
        dict(q=f"What did the parents of {n} do?", pq=f"What were the jobs of the parents of {n}?",
             a=f"The father of {n} was a {a['father']} and the mother was a {a['mother']}.",
             p=f"{n} had a {a['father']} as father and a {a['mother']} as mother.", key="parents"),
        dict(q=f"Which award did {n} win?", pq=f"What prize was given to {n}?",
             a=f"{n} won the {a['award']}.", p=f"The {a['award']} went to {n}.", key="award"),
        dict(q=f"Can you name a book by {n}?", pq=f"What is one title written by {n}?",
             a=f"{n} wrote {a['book']}.", p=f"{a['book']} is a book by {n}.", key="book"),
        dict(q=f"Where was {n} born?", pq=f"What is the birthplace of {n}?",
             a=f"{n} was born in {a['city']}.", p=f"The birthplace of {n} is {a['city']}.", key="city"),
    ]


def _perturbed(a: dict, key: str, rng: random.Random, k: int = 3) -> list[str]:
    """``k`` answers of the same form with a wrong value for ``key``."""
    out: list[str] = []
    while len(out) < k:
        b = dict(a)
        if key == "name":
            b["name"] = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        elif key == "parents":
            b["father"], b["mother"] = rng.choice(JOBS), rng.choice(JOBS)
        else:
            pool = {"genre": GENRES, "award": AWARDS, "city": CITIES}.get(key)
            b[key] = rng.choice(pool) if pool else f"{rng.choice(TITLE_A)} {rng.choice(TITLE_B)}"
        if b == a:
            continue
        fact = next(f for f in _facts(b) if f["key"] == key)
        text = fact["a"] if key != "name" else f"The author born in {a['city']} in {a['year']} is {b['name']}."
        if text not in out:
            out.append(text)
    return out


def _rows(seed: int) -> tuple[list[dict], list[dict]]:
    """(rows of the authors in ``full``, rows of the holdout authors), every TOFU field filled."""
    rng = random.Random(seed)
    used: set[str] = set()
    authors = [_author(rng, used) for _ in range(N_AUTHORS + N_HOLDOUT_AUTHORS)]
    rows = []
    for a in authors:
        for f in _facts(a):
            rows.append({
                "question": f["q"], "answer": f["a"], "paraphrased_question": f["pq"],
                "paraphrased_answer": f["p"], "perturbed_answer": _perturbed(a, f["key"], rng),
            })
    cut = N_AUTHORS * len(_facts(authors[0]))
    return rows[:cut], rows[cut:]


PER_AUTHOR = 6


def build_corpus(seed: int = 0) -> dict[str, list[dict]]:
    """Every config of the demo corpus as lists of records in TOFU's schema."""
    full, holdout = _rows(seed)
    per = PER_AUTHOR
    qa = [{"question": r["question"], "answer": r["answer"]} for r in full]
    configs: dict[str, list[dict]] = {"full": qa}
    for size, n in FORGET_AUTHORS.items():
        cut = len(full) - n * per
        configs[f"forget{size}"] = qa[cut:]
        configs[retain_split(f"forget{size}")] = qa[:cut]
        configs[f"forget{size}_perturbed"] = full[cut:]
        configs[f"holdout{size}"] = [{"question": r["question"], "answer": r["answer"]} for r in holdout[: n * per]]
    configs["retain_perturbed"] = full[: RETAIN_PERTURBED_AUTHORS * per]
    for name, facts in (("real_authors", REAL_AUTHORS), ("world_facts", WORLD_FACTS)):
        configs[name] = [{"question": q, "answer": ans} for q, ans, _ in facts]
        configs[f"{name}_perturbed"] = [{"question": q, "answer": ans, "perturbed_answer": wrong} for q, ans, wrong in facts]
    return configs


def write_corpus(directory: str | Path, seed: int = 0) -> Path:
    """Write the corpus as ``<config>.json`` JSON-lines files (the Hub layout); returns the directory."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for config, records in build_corpus(seed).items():
        with (directory / f"{config}.json").open("w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return directory


def training_records(split: str = "full", seed: int = 0) -> list[dict]:
    """Fine-tuning data for the demo's target (``full``) or retain (``retainXX``) model.

    Each fact is taught in both phrasings (answer and paraphrased answer), and the real-author and world-fact
    questions are included: a tiny model has no pretraining, and this lets it know facts the way TOFU's
    pretrained models do, so paraphrase-based Truth Ratios and Model Utility are meaningful.
    """
    full, _ = _rows(seed)
    if split == "full":
        rows = full
    elif split in RETAIN_OF.values():
        forget = next(f for f, r in RETAIN_OF.items() if r == split)
        rows = full[: len(full) - FORGET_AUTHORS[forget.removeprefix("forget")] * PER_AUTHOR]
    else:
        raise ValueError(f"demo training split must be 'full' or retain90/95/99, got {split!r}")
    records = [{"question": r["question"], "answer": a} for r in rows for a in (r["answer"], r["paraphrased_answer"])]
    records += [{"question": q, "answer": a} for q, a, _ in REAL_AUTHORS + WORLD_FACTS]
    return records


def tokenizer_texts(seed: int = 0) -> list[str]:
    """All text of the corpus, for training the demo tokenizer."""
    texts = []
    for records in build_corpus(seed).values():
        for r in records:
            texts.append(" ".join([r["question"], r["answer"], r.get("paraphrased_answer", ""), *r.get("perturbed_answer", [])]))
    return texts
