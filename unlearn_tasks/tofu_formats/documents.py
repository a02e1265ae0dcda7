"""ReLU records -> lm-eval documents: prompts, shown options, the gold letter, the scored target.

One document per question (comprehension records expand to one per QA pair or MCQ). A pair task holds the
forget and the retain split, interleaved round-robin so that ``--limit N`` keeps both (as the TOFU tasks do).
Every document has the same fields, whatever its format.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import datasets

from unlearn_tasks.tofu_formats import prompts
from unlearn_tasks.tofu_formats.data import load_split
from unlearn_tasks.tofu_formats.formats import Format
from unlearn_tasks.tofu_formats.options import ReluOptions
from unlearn_tasks.tofu_formats.sampling import LETTERS, OptionSampler

log = logging.getLogger(__name__)

REQUIRED = {
    "mcqa": ("question", "A", "B", "C", "D", "Correct option"),
    "analogy_mcqa": ("question", "A", "B", "C", "D", "correct options"),
    "analogy_qa": ("question", "A", "B", "C", "D", "correct options"),
    "cloze": ("question", "mask", "blanks"),
    "odd_one_out": ("A", "B", "C", "D", "ans"),
    "comprehension_qa": ("prompt", "QA"),
    "comprehension_mcqa": ("prompt", "mcq"),
}


def _letter(value: Any) -> int | None:
    """Index of a correct-option field (``"D"`` or ``["D"]``; the release reads its first character)."""
    if isinstance(value, (list, tuple)):
        value = value[0] if value else ""
    text = str(value or "").strip()
    return LETTERS.index(text[0].upper()) if text and text[0].upper() in LETTERS else None


def _odd_letter(record: dict) -> int | None:
    """The odd option: ``ans`` is a letter (release code) or the odd item itself (release README)."""
    ans = record["ans"]
    if isinstance(ans, dict):
        for i, letter in enumerate(LETTERS):
            if record[letter] == ans or record[letter].get("answer") == ans.get("answer"):
                return i
        return None
    return _letter(ans)


def _mc_items(fmt: Format, records: list[dict]) -> list[tuple[str | None, str, list[str], int | None]]:
    """(context, question, the four options A..D, correct index) per question."""
    items: list[tuple[str | None, str, list[str], int | None]] = []
    for r in records:
        if fmt.name == "comprehension_mcqa":
            for m in r["mcq"] or []:
                items.append((r["prompt"], m["question"], [m[x] for x in LETTERS], _letter(m.get("Correct option"))))
        elif fmt.name == "odd_one_out":
            items.append((None, "", [r[x]["answer"] for x in LETTERS], _odd_letter(r)))
        else:
            key = "Correct option" if fmt.name == "mcqa" else "correct options"
            items.append((None, r["question"], [r[x] for x in LETTERS], _letter(r[key])))
    return items


def _doc(split: str, role: str, index: int, prompt: str, target: str = "", choices: list[str] | None = None,
         gold: int = -1, options: list[str] | None = None, max_gen_toks: int = 0,
         context_ids: list[int] | None = None, target_ids: list[int] | None = None) -> dict[str, Any]:
    """One document. ``context_ids`` / ``target_ids``: the prompt and target as the release tokenises them (each
    on its own, with the tokenizer's special tokens), set in parity mode for cloze and comprehension QA."""
    return {"id": f"{split}/{index}", "split": split, "role": role, "index": index, "prompt": prompt,
            "target": target, "choices": choices or [], "gold": gold, "options": options or [],
            "max_gen_toks": max_gen_toks, "context_ids": context_ids or [], "target_ids": target_ids or []}


def release_ids(tokenizer: Any, text: str) -> list[int]:
    """``tokenizer(text).input_ids``: the release tokenises prompt and label each on its own, special tokens
    included (BOS on Llama-style tokenizers, nothing on GPT-2-style ones)."""
    return list(tokenizer(text)["input_ids"])


def _mc_docs(opts: ReluOptions, split: str, role: str, records: list[dict]) -> list[dict]:
    fmt, n = opts.fmt, opts.n_options or 4
    sampler = OptionSampler(opts.mode)
    items = _mc_items(fmt, records)
    valid = [it for it in items if it[3] is not None]
    if len(valid) < len(items):
        log.warning("%s %s: skipped %d item(s) whose correct option is not one of A-D.",
                    fmt.config, split, len(items) - len(valid))
    letters = list(LETTERS) if opts.mode == "parity" else list(LETTERS[:n])  # parity: argmax over all four
    docs = []
    for i, (context, question, options, correct) in enumerate(valid):
        shown, gold = sampler.sample(options, correct, n, i)
        prompt = (prompts.odd_one_out_prompt(shown) if fmt.name == "odd_one_out"
                  else prompts.mcqa_prompt(question, shown, context))
        docs.append(_doc(split, role, i, prompt, shown[gold], letters, gold, shown))
    return docs


def _cloze_docs(split: str, role: str, records: list[dict], tokenizer: Any = None) -> list[dict]:
    docs = []
    for r in records:
        blanks = [r["blanks"]] if isinstance(r["blanks"], str) else list(r["blanks"] or [])
        if str(r["mask"]).count(prompts.MASK) != 1 or not blanks:  # the release drops these
            continue
        prompt, target = prompts.cloze_prompt(r["question"], r["mask"]), str(blanks[0])
        ids = {} if tokenizer is None else {"context_ids": release_ids(tokenizer, prompt),
                                           "target_ids": release_ids(tokenizer, target)}
        docs.append(_doc(split, role, len(docs), prompt, target, **ids))
    if len(docs) < len(records):
        log.info("cloze %s: dropped %d record(s) without exactly one [MASK] (as the release does).",
                 split, len(records) - len(docs))
    return docs


def _generation_docs(opts: ReluOptions, split: str, role: str, records: list[dict], tokenizer: Any) -> list[dict]:
    docs = []
    if opts.format == "analogy_qa":
        for r in records:
            correct = _letter(r["correct options"])
            if correct is not None:
                docs.append(_doc(split, role, len(docs), prompts.qa_prompt(r["question"]), r[LETTERS[correct]]))
        return docs
    parity = opts.mode == "parity" and tokenizer is not None
    for r in records:
        for qa in r["QA"] or []:
            budget = generation_budget(tokenizer, qa["answer"], opts.mode) if tokenizer is not None else 0
            prompt = prompts.comprehension_qa_prompt(r["prompt"], qa["question"])
            ids = release_ids(tokenizer, prompt) if parity else None
            docs.append(_doc(split, role, len(docs), prompt, qa["answer"], max_gen_toks=budget, context_ids=ids))
    return docs


def generation_budget(tokenizer: Any, answer: str, mode: str) -> int:
    """Comprehension QA's ``max_new_tokens``: the answer's token count (parity: with special tokens, e.g. BOS,
    as the release's ``len(tokenizer(label).input_ids)``; default: without)."""
    return max(1, len(tokenizer(answer, add_special_tokens=(mode == "parity"))["input_ids"]))


def needs_tokenizer(opts: ReluOptions) -> bool:
    """Comprehension QA (its token budget) and, in parity mode, cloze (the release's own tokenisation)."""
    return opts.format == "comprehension_qa" or (opts.mode == "parity" and opts.format == "cloze")


def load_tokenizer(opts: ReluOptions) -> Any:
    """The model's tokenizer (model args ``tokenizer`` or ``pretrained``), or None with a warning. Parity mode
    cannot reproduce the release without it: a ``ValueError`` says what to pass."""
    if opts.tokenizer:
        try:
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(opts.tokenizer, **opts.tokenizer_kwargs)
        except Exception as e:  # noqa: BLE001 - any failure falls back to the task's fixed budget
            log.warning("Could not load tokenizer %r (%s).", opts.tokenizer, e)
    if opts.mode == "parity":
        raise ValueError(
            f"ReLU {opts.format} in parity mode tokenises prompts and targets as the release does and needs the model's "
            "tokenizer: pass --metadata '{\"tokenizer\": \"NAME_OR_DIR\"}' (lm_eval passes pretrained= from --model_args)."
        )
    log.warning(
        "%s: no tokenizer, so answers are generated up to the task's max_gen_toks instead of the answer's token "
        "count (the release's budget). Pass --metadata '{\"tokenizer\": \"NAME_OR_DIR\"}' (lm_eval passes "
        "pretrained= automatically).", opts.format,
    )
    return None


def split_docs(opts: ReluOptions, split: str, role: str, tokenizer: Any = None) -> list[dict]:
    """The documents of one split."""
    fmt = opts.fmt
    records = load_split(fmt.config, split, REQUIRED[fmt.name], opts.data_dir, opts.dataset_path)
    if fmt.family == "mc":
        docs = _mc_docs(opts, split, role, records)
    elif fmt.family == "cloze":
        docs = _cloze_docs(split, role, records, tokenizer if opts.mode == "parity" else None)
    else:
        docs = _generation_docs(opts, split, role, records, tokenizer)
    return docs[: opts.max_items_per_split] if opts.max_items_per_split else docs


def build_docs(opts: ReluOptions) -> list[dict]:
    """All documents of a task; the splits of a pair task interleaved."""
    tokenizer = load_tokenizer(opts) if needs_tokenizer(opts) else None
    per_split = [split_docs(opts, split, role, tokenizer) for role, split in opts.roles()]
    return [d for group in itertools.zip_longest(*per_split) for d in group if d is not None]


def load_docs(**metadata: Any) -> datasets.DatasetDict:
    """lm-eval ``custom_dataset`` entry point: metadata (YAML, ``--metadata``, model args) arrives as keywords."""
    docs = build_docs(ReluOptions.from_metadata(metadata))
    if not docs:
        raise ValueError(f"ReLU task {metadata.get('relu_format')} {metadata.get('relu_splits')}: no documents.")
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})
