"""The judge's prompts: versioned files in ``unlearn_app/judge/prompts/``, each a header of ``key: value`` lines, a
line ``---``, then the prompt with the fields ``{question}``, ``{ground_truth}`` and ``{answer}``.

Header keys: ``name``, ``version``, ``family`` (what ``unlearn judge --prompts`` names: one prompt per evaluation
set), ``benchmark`` (whose generations it judges, :mod:`.benchmarks`: ``tofu``, the default, or ``mllmu``), ``sets``
(the benchmark's sets it judges), ``parse`` (``yes-no``, or ``json-scores`` with ``keys``, ``verdict_key``,
optionally ``scale``: ``LOW-HIGH``, ``whole`` for integers only, default ``0-10``, and ``verdict``: ``yes below N``
or ``yes from N``; without ``verdict`` the prompt asks for a score alone: ``scored`` or ``unparsable``),
``max_gen_toks``, ``source`` and, for text from elsewhere, its ``licence``. A prompt is identified in every output by its name, version and the sha256 of its file."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from unlearn_app.judge.benchmarks import BENCHMARKS, JudgedBenchmark
from unlearn_tasks.metrics import judge as verdicts

FOLDER = Path(__file__).with_name("prompts")
SETS = BENCHMARKS["tofu"].sets
_FIELD = re.compile(r"\{(question|ground_truth|answer)\}")
_RULE = re.compile(r"yes (below|from) (\d+(?:\.\d+)?)")
_SCALE = re.compile(r"(\d+)-(\d+)( whole)?")


class PromptError(ValueError):
    """A prompt family or file that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class Prompt:
    name: str
    version: str
    family: str
    sets: tuple[str, ...]
    parse: str
    max_gen_toks: int
    template: str
    sha256: str
    benchmark: str = "tofu"
    keys: tuple[str, ...] = ()
    verdict_key: str = ""
    threshold: float | None = 0.0  # None: a score alone, no verdict rule
    yes_below: bool = False
    scale: tuple[int, int, bool] = (0, 10, False)  # low, high, whole numbers only

    def render(self, question: str, ground_truth: str, answer: str) -> str:
        """The prompt with its fields filled in (one pass: text inside a field is never read as a field)."""
        values = {"question": question, "ground_truth": ground_truth, "answer": answer}
        return _FIELD.sub(lambda m: values[m.group(1)], self.template)

    def verdict(self, text: str) -> tuple[str, dict[str, float] | None]:
        """(verdict, scores) of the judge's ``text`` by this prompt's parse rule (scores: json-scores only)."""
        if self.parse == "yes-no":
            return verdicts.parse_yes_no(text), None
        scores = verdicts.parse_json_scores(text, self.keys, *self.scale)
        if self.threshold is None:
            return (verdicts.SCORED if scores else verdicts.UNPARSABLE), scores
        score = scores[self.verdict_key] if scores else None
        return verdicts.verdict_from_score(score, self.threshold, self.yes_below), scores

    def identity(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version, "sha256": self.sha256}


def read_prompt(path: Path) -> Prompt:
    """One prompt file; :class:`PromptError` naming the file when its header is incomplete or wrong."""
    data = path.read_bytes()
    head, sep, template = data.decode("utf-8").partition("\n---\n")
    if not sep:
        raise PromptError(f"{path.name}: no line '---' between the header and the prompt")
    header = dict(line.split(": ", 1) for line in head.splitlines() if ": " in line)
    missing = [k for k in ("name", "version", "family", "sets", "parse", "max_gen_toks") if k not in header]
    if missing:
        raise PromptError(f"{path.name}: header lacks {', '.join(missing)}")
    bench = BENCHMARKS.get(header.get("benchmark", "tofu"))
    if bench is None:
        raise PromptError(f"{path.name}: benchmark must be one of {', '.join(BENCHMARKS)}")
    sets = tuple(s.strip() for s in header["sets"].split(","))
    if set(sets) - set(bench.sets) or set(_FIELD.findall(template)) != {"question", "ground_truth", "answer"}:
        raise PromptError(f"{path.name}: sets must be among {', '.join(bench.sets)} and the prompt must hold {{question}}, "
                          "{ground_truth} and {answer}")
    extra = {}
    if header["parse"] == "json-scores":
        rule = _RULE.fullmatch(header.get("verdict", ""))
        scale = _SCALE.fullmatch(header.get("scale", "0-10"))
        keys = tuple(k.strip() for k in header.get("keys", "").split(",") if k.strip())
        if ("verdict" in header and rule is None) or header.get("verdict_key") not in keys or scale is None or \
                int(scale.group(1)) > int(scale.group(2)):
            raise PromptError(f"{path.name}: json-scores needs keys, a verdict_key among them, optionally 'scale: "
                              "LOW-HIGH' (and ' whole') and 'verdict: yes below N' or 'yes from N'")
        extra = {"keys": keys, "verdict_key": header["verdict_key"],
                 "threshold": float(rule.group(2)) if rule else None, "yes_below": bool(rule) and rule.group(1) ==
                 "below", "scale": (int(scale.group(1)), int(scale.group(2)), bool(scale.group(3)))}
    elif header["parse"] != "yes-no":
        raise PromptError(f"{path.name}: parse must be yes-no or json-scores, not {header['parse']!r}")
    if header["parse"] == "yes-no" and bench.scored:
        raise PromptError(f"{path.name}: {bench.name} is judged by a score (json-scores without a verdict)")
    if bench.scored and extra.get("verdict_key") != getattr(bench, "score_key", None):
        raise PromptError(f"{path.name}: {bench.name}'s score is {getattr(bench, 'score_key', '')}: name it in keys "
                          "and verdict_key")
    if header["parse"] == "json-scores" and (extra["threshold"] is None) != bench.scored:
        raise PromptError(f"{path.name}: {bench.name} is judged " + (
            "by a score alone: no 'verdict' line" if bench.scored else "by a verdict: give 'verdict: yes ...'"))
    return Prompt(header["name"], header["version"], header["family"], sets, header["parse"],
                  int(header["max_gen_toks"]), template, hashlib.sha256(data).hexdigest(), bench.name, **extra)


def all_prompts(folder: Path = FOLDER) -> list[Prompt]:
    return [read_prompt(p) for p in sorted(folder.glob("*.txt"))]


def families(folder: Path = FOLDER) -> list[str]:
    return sorted({p.family for p in all_prompts(folder)})


def family_prompts(family: str, folder: Path = FOLDER) -> dict[str, Prompt]:
    """The prompt of each evaluation set in ``family``; :class:`PromptError` listing the families otherwise."""
    chosen = [p for p in all_prompts(folder) if p.family == family]
    if not chosen:
        raise PromptError(f"--prompts {family}: no such prompt family; known: {', '.join(families(folder))}")
    sets = family_benchmark(chosen).sets
    by_set = {s: p for p in chosen for s in p.sets}
    if sorted(by_set) != sorted(sets) or sum(len(p.sets) for p in chosen) != len(sets):
        raise PromptError(f"--prompts {family}: its files must give exactly one prompt per set ({', '.join(sets)})")
    return by_set


def family_benchmark(prompts) -> JudgedBenchmark:
    """The one benchmark whose generations ``prompts`` (of one family) judge; :class:`PromptError` when they mix."""
    names = {p.benchmark for p in prompts}
    if len(names) != 1:
        raise PromptError(f"prompts {', '.join(sorted(p.name for p in prompts))} judge different benchmarks "
                          f"({', '.join(sorted(names))}); one family judges one benchmark")
    return BENCHMARKS[names.pop()]


def benchmark_of_modes(modes: Mapping[str, Any] | None) -> JudgedBenchmark:
    """The benchmark a judge run's ``metric_modes`` judged (its prompt family's; TOFU for a family this package does
    not hold, whose numbers are then left unverified elsewhere)."""
    family = (modes or {}).get("prompts")
    try:
        return family_benchmark(family_prompts(family).values()) if isinstance(family, str) else BENCHMARKS["tofu"]
    except PromptError:
        return BENCHMARKS["tofu"]

