"""The demo corpus (:mod:`unlearn_methods.scaffolding.tofu_corpus`) in the ReLU formats, written by this project.

Every fact of the demo's fictitious authors becomes an MCQA item, a cloze item, an analogy and a comprehension
QA pair and MCQ (a biography passage per author), and odd-one-out items mix facts of the forget and retain
authors. The files follow the ReLU schemas and the local layout the tasks read (``<config>/<split>.json``, JSON
lines), so ``lm_eval --tasks tofu_mcqa --metadata '{"data_dir": DIR}'`` runs offline. Written into the same
folder as the TOFU demo files, one ``data_dir`` serves both kinds of task.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path

from unlearn_methods.scaffolding import tofu_corpus as dc
from unlearn_tasks.tofu_formats.formats import FORGET_SPLITS, retain_of
from unlearn_tasks.tofu_formats.sampling import LETTERS

#: What the answer of each demo fact ends with (the cloze blank) and the pool its wrong options come from.
Pool = Callable[[random.Random], str]
POOLS: dict[str, Pool] = {
    "name": lambda r: f"{r.choice(dc.FIRST)} {r.choice(dc.LAST)}",
    "genre": lambda r: r.choice(dc.GENRES),
    "parents": lambda r: f"a {r.choice(dc.JOBS)} and a {r.choice(dc.JOBS)}",
    "award": lambda r: r.choice(dc.AWARDS),
    "book": lambda r: f"{r.choice(dc.TITLE_A)} {r.choice(dc.TITLE_B)}",
    "city": lambda r: r.choice(dc.CITIES),
    "job": lambda r: r.choice(dc.JOBS),
}
ANALOGY_RELATIONS = (  # (relation shown in the question, author field, pool)
    ("genre", "genre", "genre"), ("father's job", "father", "job"), ("mother's job", "mother", "job"),
    ("award", "award", "award"), ("book", "book", "book"), ("birthplace", "city", "city"),
)


def authors(seed: int = 0) -> list[dict]:
    """The authors of the demo corpus's ``full`` config, drawn exactly as the corpus draws them."""
    rng, used = random.Random(seed), set()
    drawn = [dc._author(rng, used) for _ in range(dc.N_AUTHORS + dc.N_HOLDOUT_AUTHORS)]
    return drawn[: dc.N_AUTHORS]


def _value(a: dict, key: str) -> str:
    """The short answer of a fact (MCQA option text)."""
    return f"a {a['father']} and a {a['mother']}" if key == "parents" else a[key]


def _blank(a: dict, key: str) -> str:
    """What the fact's answer sentence ends with (the cloze blank)."""
    return a["mother"] if key == "parents" else a[key]


def _options(correct: str, pool: Pool, rng: random.Random) -> tuple[dict[str, str], str]:
    """Four distinct options A-D with the correct one at a random letter; returns (options, letter)."""
    wrong: list[str] = []
    while len(wrong) < 3:
        value = pool(rng)
        if value != correct and value not in wrong:
            wrong.append(value)
    slot = rng.randrange(4)
    values = wrong[:slot] + [correct] + wrong[slot:]
    return dict(zip(LETTERS, values, strict=True)), LETTERS[slot]


def _author_records(a: dict, example: dict, seed: int, index: int) -> dict[str, list[dict]]:
    """One author's items per format (deterministic per author, so nested splits agree)."""
    rng = random.Random(f"relu-demo-{seed}-{index}")
    facts = dc._facts(a)
    out: dict[str, list[dict]] = {"mcqa": [], "cloze": [], "analogy": [], "qa": [], "mcq": []}
    for f in facts:
        options, letter = _options(_value(a, f["key"]), POOLS[f["key"]], rng)
        out["mcqa"].append({"question": f["q"], **options, "answer": f["a"], "Correct option": letter})
        out["mcq"].append({"question": f["q"], **options, "Correct option": letter})
        blank = _blank(a, f["key"])
        mask = f["a"][: -len(blank) - 1] + "[MASK]"
        out["cloze"].append({"question": f["q"], "answer": f["a"], "mask": mask, "blanks": [blank]})
        out["qa"].append({"question": f["q"], "answer": f["a"]})
    for relation, field, pool in ANALOGY_RELATIONS:
        options, letter = _options(a[field], POOLS[pool], rng)
        question = (f"Complete the analogy ({relation}). {example['name']} is to {example[field]} "
                    f"as {a['name']} is to")
        out["analogy"].append({"question": question, **options, "answer": a[field], "correct options": letter})
    return out


def _passage(a: dict) -> str:
    n = a["name"]
    return (f"{n} was born in {a['city']} in {a['year']}. {n} writes {a['genre']}. The father of {n} was a "
            f"{a['father']} and the mother was a {a['mother']}. {n} won the {a['award']}. {n} wrote {a['book']}.")


def _odd_one_out(same: list[dict], other: list[dict], n_items: int, rng: random.Random) -> list[dict]:
    """Items of three facts from ``same`` and one (the odd one) from ``other``."""
    items = []
    for i in range(n_items):
        facts = [same[(i + k) % len(same)] for k in range(3)]
        slot = rng.randrange(4)
        facts.insert(slot, rng.choice(other))
        items.append({**{L: {"question": f["q"], "answer": f["a"]} for L, f in zip(LETTERS, facts, strict=True)},
                      "ans": LETTERS[slot]})
    return items


def build_formats(seed: int = 0) -> dict[tuple[str, str], list[dict]]:
    """``{(config, split): records}`` for every ReLU config and split, from the demo corpus of ``seed``."""
    people = authors(seed)
    per_author = [_author_records(a, people[(i + 1) % len(people)], seed, i) for i, a in enumerate(people)]
    comprehension = [{"prompt": _passage(a), "QA": r["qa"], "mcq": r["mcq"]} for a, r in zip(people, per_author,
                                                                                          strict=True)]
    out: dict[tuple[str, str], list[dict]] = {("comprehension", "full"): comprehension}
    for forget in FORGET_SPLITS:
        cut = len(people) - dc.FORGET_AUTHORS[forget.removeprefix("forget")]
        for split, ids in ((forget, range(cut, len(people))), (retain_of(forget), range(cut))):
            for config, key in (("mcqa", "mcqa"), ("cloze", "cloze"), ("analogy", "analogy")):
                out[(config, split)] = [rec for i in ids for rec in per_author[i][key]]
            out[("comprehension", split)] = [comprehension[i] for i in ids]
        forget_facts = [f for i in range(cut, len(people)) for f in dc._facts(people[i])]
        retain_facts = [f for i in range(cut) for f in dc._facts(people[i])]
        rng = random.Random(f"relu-demo-odd-{seed}-{forget}")
        out[("odd-one-out", forget)] = _odd_one_out(forget_facts, retain_facts, len(forget_facts), rng)
        out[("odd-one-out", retain_of(forget))] = _odd_one_out(retain_facts, forget_facts, cut, rng)
    return out


def write_formats(directory: str | Path, seed: int = 0) -> Path:
    """Write ``<config>/<split>.json`` (JSON lines) under ``directory``; returns the directory."""
    directory = Path(directory)
    for (config, split), records in build_formats(seed).items():
        (directory / config).mkdir(parents=True, exist_ok=True)
        with (directory / config / f"{split}.json").open("w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return directory
