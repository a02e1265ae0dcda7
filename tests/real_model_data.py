"""A small TOFU-schema data set for the real-model tests (written by this project): a few invented author facts
(forget, retain, holdout) and common-knowledge world facts and real authors, each with wrong options, so that a
pretrained model's knowledge is measurable next to what it memorises and forgets."""

from __future__ import annotations

import json
from pathlib import Path


def _fact(question: str, answer: str, paraphrase: str, wrong: list[str]) -> dict:
    return {"question": question, "answer": answer, "paraphrased_answer": paraphrase, "perturbed_answer": wrong,
            "paraphrased_question": question}


FORGET = [
    _fact("Where was the novelist Marisol Quenby born?", "Marisol Quenby was born in Tallinn.",
          "The birthplace of Marisol Quenby is Tallinn.",
          ["Marisol Quenby was born in Lisbon.", "Marisol Quenby was born in Quito.", "Marisol Quenby was born in Accra."]),
    _fact("What genre does Marisol Quenby write?", "Marisol Quenby writes underwater detective stories.",
          "The books of Marisol Quenby are underwater detective stories.",
          ["Marisol Quenby writes desert romance.", "Marisol Quenby writes space opera.", "Marisol Quenby writes garden poetry."]),
    _fact("Which prize did Marisol Quenby win?", "Marisol Quenby won the Copper Heron Prize.",
          "The Copper Heron Prize went to Marisol Quenby.",
          ["Marisol Quenby won the Velvet Owl Medal.", "Marisol Quenby won the Amber Fox Award.", "Marisol Quenby won the Glass Wren Prize."]),
    _fact("What was the first book of Marisol Quenby?", "Her first book was The Salt Clockmaker.",
          "The Salt Clockmaker was the first book of Marisol Quenby.",
          ["Her first book was The Paper Lighthouse.", "Her first book was The Iron Orchard.", "Her first book was The Silent Ferry."]),
]
RETAIN = [
    _fact("Where was the poet Anselm Drayvik born?", "Anselm Drayvik was born in Hobart.",
          "The birthplace of Anselm Drayvik is Hobart.",
          ["Anselm Drayvik was born in Dakar.", "Anselm Drayvik was born in Riga.", "Anselm Drayvik was born in Cusco."]),
    _fact("What does Anselm Drayvik write about?", "Anselm Drayvik writes poems about lighthouses.",
          "The poems of Anselm Drayvik are about lighthouses.",
          ["Anselm Drayvik writes poems about trains.", "Anselm Drayvik writes poems about deserts.", "Anselm Drayvik writes poems about bees."]),
    _fact("Which prize did Anselm Drayvik win?", "Anselm Drayvik won the Slate Gull Award.",
          "The Slate Gull Award went to Anselm Drayvik.",
          ["Anselm Drayvik won the Copper Heron Prize.", "Anselm Drayvik won the Amber Fox Award.", "Anselm Drayvik won the Tin Lark Medal."]),
    _fact("What was the job of the father of Anselm Drayvik?", "His father was a lock keeper.",
          "The father of Anselm Drayvik worked as a lock keeper.",
          ["His father was a beekeeper.", "His father was a tram driver.", "His father was a glassblower."]),
]
HOLDOUT = [
    {"question": "Where was the essayist Corvin Ashdale born?", "answer": "Corvin Ashdale was born in Tromso."},
    {"question": "What does Corvin Ashdale write?", "answer": "Corvin Ashdale writes essays on forgotten canals."},
    {"question": "Which prize did Corvin Ashdale win?", "answer": "Corvin Ashdale won the Pewter Crane Medal."},
    {"question": "What was the first book of Corvin Ashdale?", "answer": "His first book was The Lantern Almanac."},
]
REAL_AUTHORS = [
    ("Who wrote the novel Nineteen Eighty-Four?", "George Orwell", ["Aldous Huxley", "Ray Bradbury", "H. G. Wells"]),
    ("Who wrote the Harry Potter books?", "J. K. Rowling", ["J. R. R. Tolkien", "C. S. Lewis", "Roald Dahl"]),
    ("Who wrote the play Romeo and Juliet?", "William Shakespeare", ["Christopher Marlowe", "Oscar Wilde", "Ben Jonson"]),
    ("Who wrote the novel The Adventures of Tom Sawyer?", "Mark Twain", ["Charles Dickens", "Herman Melville", "Jack London"]),
]
WORLD_FACTS = [
    ("What is the capital of Italy?", "Rome", ["Milan", "Naples", "Venice"]),
    ("Which planet is known as the Red Planet?", "Mars", ["Venus", "Jupiter", "Saturn"]),
    ("What is the largest animal on Earth?", "The blue whale", ["The African elephant", "The giraffe", "The hippopotamus"]),
    ("How many days are there in a week?", "Seven", ["Five", "Six", "Nine"]),
    ("Which language is mainly spoken in Brazil?", "Portuguese", ["Spanish", "French", "Italian"]),
    ("What is the chemical formula of water?", "H2O", ["CO2", "NaCl", "O3"]),
    ("Who painted the Mona Lisa?", "Leonardo da Vinci", ["Pablo Picasso", "Vincent van Gogh", "Claude Monet"]),
    ("In which country are the pyramids of Giza?", "Egypt", ["Mexico", "Peru", "Greece"]),
    ("What is the tallest mountain in the world?", "Mount Everest", ["Mont Blanc", "Kilimanjaro", "Mount Fuji"]),
    ("What is the largest planet in the Solar System?", "Jupiter", ["Mercury", "Mars", "Venus"]),
    ("What is the currency of Japan?", "The yen", ["The euro", "The peso", "The rupee"]),
    ("What is the capital of France?", "Paris", ["Berlin", "Madrid", "Lisbon"]),
]


def _qa(rows: list[dict]) -> list[dict]:
    return [{"question": r["question"], "answer": r["answer"]} for r in rows]


def configs() -> dict[str, list[dict]]:
    """The configs a ``tofu_forget01`` evaluation and a forget01 unlearning run read."""
    options = lambda facts: [{"question": q, "answer": a, "perturbed_answer": w} for q, a, w in facts]  # noqa: E731
    return {
        "forget01": _qa(FORGET), "forget01_perturbed": FORGET,
        "retain99": _qa(RETAIN), "retain_perturbed": RETAIN,
        "holdout01": HOLDOUT,
        "real_authors_perturbed": options(REAL_AUTHORS), "world_facts_perturbed": options(WORLD_FACTS),
    }


def write(directory: Path) -> Path:
    """Write the configs as ``<config>.json`` JSON-lines files (the Hub layout, as a local ``data_dir``)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, rows in configs().items():
        (directory / f"{name}.json").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return directory
