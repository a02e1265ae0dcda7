"""A forget corpus written by the model itself, as RWKU's release writes its corpora (``generation/``), for models
the release did not cover (``unlearn run --data rwku --rwku-corpus generated``).

Restated from the release's ``pair_generation.py`` and ``question_generation.py``:

* biographies (``text`` and ``pair``): the chat template over a system turn ``"{intro} You know {subject} very
  well."`` and a user turn ``"Please write a short biography of {subject}."``, the generation prompt, then a
  response prefix; the text is the prefix followed by the generation. The fabricated biography (``pair``'s preferred
  answer) asks ``"{intro} You don't know {subject} at all."`` / ``"Please make up a short biography of
  {subject}."`` and drops the words that call it made up (:data:`FABRICATION_WORDS`). The pair's prompt is
  ``"{intro} Please write a short biography of {subject}."``. The release samples (temperature 1.0, top-p 0.9) 512
  new tokens per prefix of its list (``generation/all_truncated_outputs.json``: pass it with ``--rwku-prefixes``;
  the default is one empty prefix);
* questions (``refusal``): one user turn ``"{intro}\\nPlease generate a question about {subject} based on what you
  know about {subject}\\n"``, the generation prompt, then ``Question:``; 50 new tokens sampled with the model's own
  generation settings, the first line kept; each question gets a refusal, in turn from the list (the release:
  ``idontknow.jsonl``; here ``--idk-file`` or the built-in list); the release writes 300 per target.

Prompts are encoded with the tokenizer's special tokens (as the release does) and generation stops at EOS or
Llama-3's ``<|eot_id|>``. ``greedy`` decoding replaces sampling for deterministic corpora (tests).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

KNOW_SYSTEM = "{intro} You know {subject} very well."
BIOGRAPHY = "Please write a short biography of {subject}."
UNKNOWN_SYSTEM = "{intro} You don't know {subject} at all."
MAKE_UP = "Please make up a short biography of {subject}."
PAIR_PROMPT = "{intro} Please write a short biography of {subject}."
QUESTION_REQUEST = "{intro}\nPlease generate a question about {subject} based on what you know about {subject}\n"
QUESTION_PREFIX = "Question:"
#: removed from a fabricated biography, in this order
FABRICATION_WORDS = ("totally fabricated ", "completely fabricated ", "totally made-up ", "completely made-up ",
                     "totally fictional ", "completely fictional ")
#: the release's sampling of the biographies
BIOGRAPHY_SAMPLING = {"do_sample": True, "temperature": 1.0, "top_p": 0.9}
QUESTION_TOKENS = 50
#: where a run folder keeps the generated corpus
FOLDER = "rwku_generated"


@dataclass
class GenerationSettings:
    decoding: str = "sample"  # "sample" (the release's) or "greedy"
    max_new_tokens: int = 512  # per biography
    prefixes: list[str] = field(default_factory=lambda: [""])
    questions: int = 300  # per target (refusal corpus)
    refusals: list[str] = field(default_factory=list)
    batch_size: int = 8
    seed: int = 0


def chat_prompt(tokenizer, system: str | None, user: str) -> str:
    """The chat template over an optional system turn and a user turn, with the generation prompt."""
    messages = ([{"role": "system", "content": system}] if system is not None else []) + [{"role": "user",
                                                                                          "content": user}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def biography_prompt(tokenizer, subject: str, intro: str, prefix: str = "", fabricated: bool = False) -> str:
    """The prompt for a true (or fabricated) biography of ``subject``, ending with the response prefix."""
    system, user = (UNKNOWN_SYSTEM, MAKE_UP) if fabricated else (KNOW_SYSTEM, BIOGRAPHY)
    return chat_prompt(tokenizer, system.format(intro=intro, subject=subject), user.format(subject=subject)) + prefix


def question_prompt(tokenizer, subject: str, intro: str) -> str:
    """The prompt for a question about ``subject``."""
    return chat_prompt(tokenizer, None, QUESTION_REQUEST.format(intro=intro, subject=subject)) + QUESTION_PREFIX


def unfabricate(text: str) -> str:
    """A fabricated biography without the words that call it made up."""
    for words in FABRICATION_WORDS:
        text = text.replace(words, "")
    return text


def stop_ids(tokenizer) -> list[int]:
    """EOS and, where the vocabulary has it, Llama-3's end-of-turn token."""
    ids = [tokenizer.eos_token_id]
    eot = tokenizer.convert_tokens_to_ids("<|eot_id|>")
    if isinstance(eot, int) and eot != tokenizer.unk_token_id and eot not in ids:
        ids.append(eot)
    return ids


@torch.no_grad()
def generate(model, tokenizer, prompts: list[str], max_new_tokens: int, sampling: dict[str, Any] | None,
             batch_size: int = 8) -> list[str]:
    """The model's continuation of each prompt (new tokens only, special tokens dropped); ``sampling`` None is
    greedy."""
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    options = dict(sampling) if sampling else {"do_sample": False}
    if not sampling:
        options.update(temperature=None, top_p=None, top_k=None)
    texts: list[str] = []
    try:
        for i in range(0, len(prompts), batch_size):
            batch = tokenizer(prompts[i:i + batch_size], return_tensors="pt", padding=True).to(model.device)
            out = model.generate(**batch, max_new_tokens=max_new_tokens, pad_token_id=pad,
                                 eos_token_id=stop_ids(tokenizer), **options)
            texts += tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
    finally:
        tokenizer.padding_side = side
    return texts


def generate_rows(kind: str, model, tokenizer, intros: dict[str, str], targets: list[str],
                  settings: GenerationSettings) -> list[dict]:
    """The rows of a ``kind`` corpus (``text``, ``pair``, ``refusal``) about ``targets``, in the release's schema
    (``train_positive_*``: id, text, subject, intro; ``train_pair_*``: id, prompt, response [chosen, rejected],
    subject, intro; ``train_refusal_*``: instruction, input, output, subject, intro)."""
    torch.manual_seed(settings.seed)
    greedy = settings.decoding == "greedy"
    rows: list[dict] = []
    for subject in targets:
        intro = intros[subject]
        if kind == "refusal":
            prompts = [question_prompt(tokenizer, subject, intro)] * settings.questions
            questions = generate(model, tokenizer, prompts, QUESTION_TOKENS, None if greedy else {"do_sample": True},
                                 settings.batch_size)
            rows += [{"instruction": q.split("\n", 1)[0].strip(), "input": "",
                      "output": settings.refusals[i % len(settings.refusals)], "subject": subject, "intro": intro}
                     for i, q in enumerate(questions)]
            continue
        sampling = None if greedy else BIOGRAPHY_SAMPLING
        true = generate(model, tokenizer, [biography_prompt(tokenizer, subject, intro, p) for p in settings.prefixes],
                        settings.max_new_tokens, sampling, settings.batch_size)
        true = [p + t for p, t in zip(settings.prefixes, true)]
        if kind == "text":
            rows += [{"id": f"{subject} {n}", "text": t, "subject": subject, "intro": intro} for n, t in enumerate(true)]
            continue
        made_up = generate(model, tokenizer, [biography_prompt(tokenizer, subject, intro, p, fabricated=True)
                                              for p in settings.prefixes], settings.max_new_tokens, sampling,
                           settings.batch_size)
        rows += [{"id": f"{subject} {n}", "prompt": PAIR_PROMPT.format(intro=intro, subject=subject),
                  "response": [unfabricate(p + f), t], "subject": subject, "intro": intro}
                 for n, (p, f, t) in enumerate(zip(settings.prefixes, made_up, true))]
    rows = [r for r in rows if (r.get("text") or r.get("instruction") or r.get("prompt", "")).strip()]
    if not rows:
        raise ValueError(f"The model wrote nothing usable for the RWKU {kind} corpus of {targets[:3]}.")
    return rows


def read_prefixes(path: str | None) -> list[str]:
    """Response prefixes from a JSON array of texts (the release's ``all_truncated_outputs.json``) or one a line;
    without a file, one empty prefix."""
    if not path:
        return [""]
    text = Path(path).expanduser().read_text(encoding="utf-8")
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = text.splitlines()
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"--rwku-prefixes {path}: expected a JSON array of texts or one prefix a line.")
    return value


def save_corpus(folder: Path, config: str, rows: list[dict], provenance: dict[str, Any]) -> Path:
    """``folder/<config>.json`` (the rows) and ``folder/<config>.provenance.json`` (how they were written)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{config}.json"
    path.write_text(json.dumps(rows, indent=2, ensure_ascii=False), encoding="utf-8")
    (folder / f"{config}.provenance.json").write_text(json.dumps(provenance, indent=2, ensure_ascii=False),
                                                     encoding="utf-8")
    return path


def provenance(model: str, kind: str, targets: list[str], settings: GenerationSettings) -> dict[str, Any]:
    """What a generated corpus records about itself: model, targets, prompts and decoding."""
    from harness_ext.provenance import package_version

    return {"model": model, "kind": kind, "targets": targets, "written": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                         time.gmtime()),
            "method": "RWKU release generation/ (pair_generation.py, question_generation.py), restated",
            "prompts": {"know_system": KNOW_SYSTEM, "biography": BIOGRAPHY, "unknown_system": UNKNOWN_SYSTEM,
                        "make_up": MAKE_UP, "pair_prompt": PAIR_PROMPT, "question": QUESTION_REQUEST,
                        "question_prefix": QUESTION_PREFIX},
            "decoding": settings.decoding, "sampling": BIOGRAPHY_SAMPLING if settings.decoding == "sample" else None,
            "max_new_tokens": settings.max_new_tokens, "question_tokens": QUESTION_TOKENS,
            "settings": {k: v for k, v in asdict(settings).items() if k != "refusals"},
            "lm_eval_unlearning": package_version()}
