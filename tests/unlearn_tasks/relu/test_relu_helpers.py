"""Helpers for the ReLU tests (no tests here): hand-made records in the ReLU schemas (written by this project;
no ReLU data) and a scripted model whose answers are known, so every ReLU score can be computed by hand."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from lm_eval.api.model import LM


def _mc(question, options, correct, key="Correct option"):
    answer = options["ABCD".index(correct[0])]
    return {"question": question, **dict(zip("ABCD", options)), "answer": answer, key: correct}


def _odd(answers, ans):
    return {**{L: {"question": f"q {a}", "answer": a} for L, a in zip("ABCD", answers)}, "ans": ans}


#: Option texts the scripted model believes. An item whose believed text is the correct one is "known" (correct
#: in every mode and option count); one whose believed texts are all the wrong ones is "confused" (always wrong).
BELIEVED = {
    "Hina Khan", "Hina Ahmed", "Hina Ali",  # mcqa forget 0: confused
    "Tokyo",  # mcqa forget 1: known
    "mystery", "1975",  # mcqa retain 0, 1: known
    "Pen Award", "Book Prize", "Ink Medal",  # mcqa retain 2: confused
    "Lima",  # analogy forget: known
    "thriller", "haiku", "parody",  # analogy retain: confused
    "F3 is a chemist.",  # odd-one-out forget 0 (odd = C): known
    "G1 is a baker.", "G3 is a tailor.", "G4 is a pilot.",  # odd-one-out forget 1 (odd = B): confused
    "R2 is a painter.",  # odd-one-out retain (odd = B): known
    "geology", "red",  # comprehension MCQ forget, retain 0: known
    "seven", "nine", "ten",  # comprehension MCQ retain 1: confused
}
KNOWN_WORDS = {"fantasy", "Nobel"}  # cloze: log p = -0.5 per known word, -2.0 otherwise
GENERATIONS = {  # question -> scripted generation
    "CQ1": "the cat sat", "CQ2": "born in Lisbon", "CQ3": "Lisbon",
    "X is to Lisbon as Y is to": "Y is to Lima.", "U is to fantasy as V is to": "fiction",
}
ABSENT_LETTER_LL = -0.05  # the scripted model prefers a letter that is not shown (parity counts it as wrong)


def write_fixture(root: Path) -> Path:
    """ReLU-schema files for forget10 and retain90 of every config, in the local layouts the loader accepts."""
    files = {
        # JSON array (what the release's download_from_hf.py writes); "Correct option" as a letter or a list
        "mcqa/forget10.json": [_mc("Who wrote Q1?", ["Hina Khan", "Hina Ahmed", "Hina Ali", "Hina Ameen"], "D"),
                               _mc("Where was Q2 born?", ["Paris", "Tokyo", "Rome", "Oslo"], "B")],
        "mcqa/retain90.jsonl": [_mc("Genre of R1?", ["poetry", "drama", "mystery", "satire"], ["C"]),
                                _mc("Birth year of R2?", ["1975", "1980", "1990", "1960"], ["A"]),
                                _mc("Award of R3?", ["Pen Award", "Gold Star", "Book Prize", "Ink Medal"], ["B"])],
        # the Hub's cloze file names carry a suffix
        "cloze/forget10_cloze.json": [
            {"question": "In which genre does Hina Ameen primarily write?", "answer": "...",
             "mask": "Hina Ameen primarily contributes to the [MASK]", "blanks": ["geology genre"]},
            {"question": "Dropped?", "answer": "...", "mask": "[MASK] and [MASK]", "blanks": ["a", "b"]}],
        "cloze/retain90.json": [
            {"question": "Genre?", "answer": "...", "mask": "R1 writes [MASK]", "blanks": ["fantasy"]},
            {"question": "Award?", "answer": "...", "mask": "R3 won the [MASK]", "blanks": ["Nobel Prize"]}],
        "analogy/forget10.json": [{"question": "X is to Lisbon as Y is to", "A": "Porto", "B": "Oslo", "C": "Lima",
                                   "D": "Quito", "answer": "Lima", "correct options": "C"}],
        "analogy/retain90.json": [{"question": "U is to fantasy as V is to", "A": "science fiction", "B": "thriller",
                                   "C": "haiku", "D": "parody", "answer": "science fiction", "correct options": ["A"]}],
        "odd-one-out/forget10.json": [
            _odd(["F1 is a nurse.", "F2 is a judge.", "F3 is a chemist.", "F4 is a poet."], "C"),
            _odd(["G1 is a baker.", "G2 is a monk.", "G3 is a tailor.", "G4 is a pilot."], "B")],
        # the README's form: `ans` holds the odd item itself
        "odd-one-out/retain90.json": [{
            **_odd(["R1 is a cook.", "R2 is a painter.", "R3 is a mason.", "R4 is a clerk."], "B"),
            "ans": {"question": "q R2 is a painter.", "answer": "R2 is a painter."}}],
        "comprehension/forget10.json": [{
            "prompt": "Hina Ameen writes geology books.",
            "QA": [{"question": "CQ1", "answer": "the cat sat on the mat"}],
            "mcq": [{"question": "Genre?", "A": "poetry", "B": "geology", "C": "drama", "D": "satire",
                     "Correct option": "B"}]}],
        "comprehension/retain90.json": [{
            "prompt": "R1 was born in Lisbon.",
            "QA": [{"question": "CQ2", "answer": "born in Lisbon"}, {"question": "CQ3", "answer": "Lisbon"}],
            "mcq": [{"question": "Colour?", "A": "blue", "B": "green", "C": "red", "D": "black", "Correct option": "C"},
                    {"question": "Count?", "A": "eight", "B": "seven", "C": "nine", "D": "ten",
                     "Correct option": "A"}]}],
    }
    for rel, records in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.startswith("mcqa/forget10"):
            path.write_text(json.dumps(records))
        else:
            path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return root


#: Hand-computed scores of the scripted model: task -> (forget, retain) in default mode.
E_CLOZE_F = math.exp(-2.0)  # "geology genre": two unknown words
E_CLOZE_R = (math.exp(-0.5) + math.exp((-0.5 - 2.0) / 2)) / 2  # "fantasy"; "Nobel Prize"
EXPECTED = {
    "tofu_mcqa": (0.5, 2 / 3),
    "tofu_mcqa_2opt": (0.5, 2 / 3),
    "tofu_cloze": (E_CLOZE_F, E_CLOZE_R),
    "tofu_analogy_mcqa": (1.0, 0.0),
    "tofu_analogy_qa": (1.0, 0.5),  # "Y is to Lima." vs "Lima"; "fiction" vs "science fiction"
    "tofu_odd_one_out_3opt": (0.5, 1.0),
    "tofu_comprehension_qa": (40 / 63, (1.0 + 2 / 3) / 2),  # see test_relu_scoring
    "tofu_comprehension_mcqa": (1.0, 0.5),
}
#: In parity mode the letters compared are always A-D: with fewer shown options the scripted model's favourite
#: absent letter wins, so every item is wrong; 4-option tasks and the other formats score as in default.
PARITY_ZERO = {"tofu_mcqa_2opt", "tofu_odd_one_out_3opt"}


class ScriptedLM(LM):
    """An lm-eval model with scripted answers (see the module constants); records its requests."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: dict[str, list] = {}

    def _log(self, kind, requests):
        self.requests.setdefault(kind, []).extend(r.args for r in requests)

    def loglikelihood(self, requests):
        self._log("loglikelihood", requests)
        out = []
        for req in requests:
            ctx, cont = req.args[:2]
            shown = dict(re.findall(r"^([A-D])\. (.*)$", ctx, flags=re.M))
            letter = cont.strip()
            ll = ABSENT_LETTER_LL if letter not in shown else (-0.1 if shown[letter] in BELIEVED else -1.0)
            out.append((ll, False))
        return out

    def loglikelihood_rolling(self, requests):
        raise NotImplementedError

    def generate_until(self, requests):
        self._log("generate_until", requests)
        return [GENERATIONS[re.findall(r"Question: (.*)\nAnswer:$", r.args[0])[-1]] for r in requests]

    def unlearn_answer_logprobs(self, requests):
        self._log("unlearn_answer_logprobs", requests)
        return [{"logprobs": [-0.5 if w in KNOWN_WORDS else -2.0 for w in r.args[1].split()] + [-0.1],
                 "vocab_mean": None, "vocab_var": None} for r in requests]
