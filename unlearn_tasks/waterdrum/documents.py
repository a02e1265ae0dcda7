"""Build the documents of a WaterDrum evaluation: every query of a config, each tagged with its owner id.

* **Ax** (``Glow-AI/WaterDrum-Ax``): one document per text of the ``retain`` and ``forget`` splits (the ``full``
  split is their concatenation). Prompt = the first ``prompt_tokens`` (50) tokens of the text under the evaluated
  model's tokenizer, decoded; the rest of the text is the ROUGE reference. Owner = an integer owner column
  (``owner_id``, ``owner``, ``label``, ``labels``, ``class``), or else the row's position in ``full``: the data is
  ordered by owner in equal blocks (20 owners x 400 texts; ``owners`` metadata for other sizes). KnowMem questions
  come from the ``eval_knowmem`` config (``question``, ``answer``; the last forget fraction of its rows is the
  forget owners', as in WaterDrum's evaluation).
* **TOFU** (``Glow-AI/WaterDrum-TOFU``): one document per question of ``retain`` (owner 0) and ``forget`` (owner 1).

Sets are interleaved round-robin so that ``--limit N`` still covers forget and retain.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import datasets

from unlearn_tasks.dataset_loader import DataError
from unlearn_tasks.waterdrum.data import load_split
from unlearn_tasks.waterdrum.options import WaterDrumOptions

log = logging.getLogger(__name__)

OWNER_COLUMNS = ("owner_id", "owner", "label", "labels", "class")
KNOWMEM_CONFIG = "eval_knowmem"


def _doc(kind: str, split: str, index: int, owner: int, prompt: str, reference: str,
         question: str = "", text: str = "") -> dict[str, Any]:
    return {"id": f"{kind}/{split}/{index}", "kind": kind, "split": split, "index": index, "owner": int(owner),
            "prompt": prompt, "reference": reference, "question": question, "text": text}


def _encoder(options: WaterDrumOptions) -> Any:
    """The tokenizer that cuts Ax prompts: ``prompt_tokenizer``, else the model's, else the verification one."""
    from unlearn_tasks.waterdrum.tokenizer import load_tokenizer

    name = options.prompt_tokenizer or options.model_tokenizer
    if name:
        return load_tokenizer(name)
    log.warning("WaterDrum-Ax: no model tokenizer in the metadata (pretrained=/tokenizer=), so prompts are cut at %d "
                "tokens of the verification tokenizer; pass prompt_tokenizer to choose.", options.prompt_tokens)
    return load_tokenizer(options.verify_tokenizer)


def split_prompt(encoder: Any, text: str, n_tokens: int) -> tuple[str, str]:
    """``(prompt, rest)``: the first ``n_tokens`` tokens of ``text`` decoded, and the remaining text."""
    ids = list(encoder.encode(text))
    prompt = encoder.decode(ids[:n_tokens])
    if text.startswith(prompt):
        return prompt, text[len(prompt):]
    return prompt, encoder.decode(ids[n_tokens:])


def _owner_column(rows: list[dict]) -> str | None:
    for col in OWNER_COLUMNS:
        if rows and col in rows[0] and all(isinstance(r.get(col), int) and not isinstance(r.get(col), bool) for r in rows):
            return col
    return None


def _ax_owners(retain: list[dict], forget: list[dict], options: WaterDrumOptions) -> tuple[list[int], list[int]]:
    rows = retain + forget
    col = _owner_column(rows)
    if col is not None:
        owners = [int(r[col]) for r in rows]
    else:
        if len(rows) % options.owners:
            raise DataError(
                f"{options.repo_id} {options.config}: {len(rows)} texts do not split into {options.owners} equal owner "
                f"blocks. Give the number of owners (--metadata '{{\"owners\": N}}') or an integer owner column "
                f"({', '.join(OWNER_COLUMNS)})."
            )
        block = len(rows) // options.owners
        owners = [i // block for i in range(len(rows))]
    return owners[: len(retain)], owners[len(retain):]


def _cap(rows: list[dict], options: WaterDrumOptions) -> list[dict]:
    return rows[: options.max_items_per_split] if options.max_items_per_split else rows


def _knowmem_docs(options: WaterDrumOptions, forget_fraction: float) -> list[list[dict]]:
    try:
        rows = load_split(options.repo_id, KNOWMEM_CONFIG, options.knowmem_split, ("question", "answer"), options.local_dir)
    except DataError as e:
        log.warning("WaterDrum-Ax: no KnowMem questions (%s); forget_knowmem and retain_knowmem are NaN.", e)
        return []
    n_forget = int(round(len(rows) * forget_fraction))
    cut = len(rows) - n_forget
    sets: list[list[dict]] = []
    for split, part, offset in (("retain", rows[:cut], 0), ("forget", rows[cut:], cut)):
        docs = [_doc("knowmem", split, i, (offset + i) * options.owners // max(len(rows), 1), r["question"],
                     str(r["answer"]), question=r["question"]) for i, r in enumerate(_cap(part, options))]
        sets.append(docs)
    return sets


def ax_docs(options: WaterDrumOptions) -> list[list[dict]]:
    """Document sets of WaterDrum-Ax: retain texts, forget texts, optional duplicates, KnowMem questions."""
    rows = {s: load_split(options.repo_id, options.config, s, ("text",), options.local_dir)
            for s in dict.fromkeys(["retain", "forget", *options.splits])}
    retain_owner, forget_owner = _ax_owners(rows["retain"], rows["forget"], options)
    owner_of = {"retain": retain_owner, "forget": forget_owner}
    encoder = _encoder(options)
    sets = []
    for split in options.splits:
        owners = owner_of.get(split) or [int(options.duplicate_owner)] * len(rows[split])  # type: ignore[arg-type]
        docs = []
        for i, row in enumerate(_cap(rows[split], options)):
            prompt, rest = split_prompt(encoder, str(row["text"]), options.prompt_tokens)
            docs.append(_doc("text", split, i, owners[i], prompt, rest, text=str(row["text"])))
        sets.append(docs)
    if "knowmem" in options.parts:
        total = len(rows["retain"]) + len(rows["forget"])
        sets += _knowmem_docs(options, len(rows["forget"]) / max(total, 1))
    return sets


def tofu_docs(options: WaterDrumOptions) -> list[list[dict]]:
    """Document sets of WaterDrum-TOFU: questions of retain (owner 0), forget (owner 1), optional duplicates."""
    owner = {"retain": 0, "forget": 1}
    sets = []
    for split in options.splits:
        rows = load_split(options.repo_id, options.config, split, ("question", "answer"), options.local_dir)
        who = owner.get(split, options.duplicate_owner)
        sets.append([_doc("text", split, i, int(who), r["question"], str(r["answer"]), question=r["question"],  # type: ignore[arg-type]
                          text=str(r["answer"])) for i, r in enumerate(_cap(rows, options))])
    return sets


def build_docs(options: WaterDrumOptions) -> list[dict[str, Any]]:
    """All documents, interleaved round-robin across sets."""
    sets = ax_docs(options) if options.benchmark == "ax" else tofu_docs(options)
    return [d for group in itertools.zip_longest(*sets) for d in group if d is not None]


def load_docs(**metadata: Any) -> datasets.DatasetDict:
    """lm-eval ``custom_dataset`` entry point: metadata (YAML, ``--metadata``, model args) arrives as keywords."""
    docs = build_docs(WaterDrumOptions.from_metadata(metadata))
    if not docs:
        raise DataError("WaterDrum: no documents (empty splits?).")
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})
