"""DUSK's data at run time: the Hub (``AI-ISL/DUSK``) or a local folder in its layout, and the documents of each
measure.

A local folder (``data_dir`` / ``dusk_data_dir``, or ``$UNLEARN_DATA_DIR/AI-ISL/DUSK``) is read, per config and
split, from the first of:

1. the GitHub release's files (``AI-ISL/DUSK`` code repository, ``data/Prof/``: the folder itself or a clone of the
   repository): one text file per style (``Chronological.txt``, ``Feature_Story.txt``, ...), ``eval/holdout.txt``,
   ``eval/verbatim.json`` and the QA sets ``eval/GeneralQA.jsonl`` ... (:data:`RELEASE_FILES`);
2. the file(s) that the folder's ``README.md`` maps them to (its ``configs:`` front matter, globs as on the Hub);
3. the Hub's files: ``<config>-*.parquet`` beside the README (the ``eval_*`` configs) and ``raw/<split>-*.parquet``;
4. JSON: ``<config>.jsonl`` / ``<config>.json`` (the Hub's first layout) or ``<config>/<split>.json``.

The membership-inference passages are the release's: each text (the forget style's documents, each retain style's,
the holdout professors') is tokenized once with the model's tokenizer and cut into whole windows of
``dusk_mia_window`` tokens (1024), each decoded back to text.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness_ext.provenance import note_data_source
from unlearn_tasks.dataset_loader import (
    DataError,
    check_rows,
    load_from_hub,
    local_config_file,
    read_json_records,
    read_parquet,
    read_utf8,
    readme_data_files,
    resolve_local_folder,
    split_files,
)
from unlearn_tasks.muse.prompts import knowmem_prompt

if TYPE_CHECKING:
    import datasets

    from unlearn_tasks.dusk.options import DuskOptions

log = logging.getLogger(__name__)

QA = ("question", "answer")
#: config -> (its split on the Hub, the fields its rows need)
CONFIGS = {
    "eval_verbatim": ("eval", ("prompt", "gt")),
    "eval_specific_forget_qa": ("eval", QA),
    "eval_specific_retain_qa": ("eval", QA),
    "eval_general_qa": ("eval", QA),
    "eval_icl": ("eval", QA),
    "eval_icl_mcqa": ("eval", QA),
    "eval_holdout": ("eval", ("text",)),
}
#: the ``raw`` config's splits: the forget style and the four retain styles (each one text per professor)
FORGET_SPLIT = "forget_chronological"
RETAIN_SPLITS = ("retain_feature_story", "retain_interview", "retain_inverted_pyramid", "retain_listicle")
#: each QA measure's set and config
QA_SETS = {"forget_qa": "eval_specific_forget_qa", "shared_qa": "eval_general_qa", "retain_qa": "eval_specific_retain_qa"}
#: how the release's text files separate one professor's document from the next (three blank lines)
DOCUMENT_SEPARATOR = "\n\n\n\n"
#: (config, split) -> its file in the GitHub release's ``data/Prof/`` (read at commit 129a0a5 of AI-ISL/DUSK)
RELEASE_FILES = {
    ("eval_verbatim", "eval"): "eval/verbatim.json",
    ("eval_specific_forget_qa", "eval"): "eval/SpecificForgetQA.jsonl",
    ("eval_specific_retain_qa", "eval"): "eval/SpecificRetainQA.jsonl",
    ("eval_general_qa", "eval"): "eval/GeneralQA.jsonl",
    ("eval_icl", "eval"): "eval/icl.jsonl",
    ("eval_icl_mcqa", "eval"): "eval/icl_mcqa.jsonl",
    ("eval_holdout", "eval"): "eval/holdout.txt",
    ("raw", FORGET_SPLIT): "Chronological.txt",
    ("raw", "retain_feature_story"): "Feature_Story.txt",
    ("raw", "retain_interview"): "Interview.txt",
    ("raw", "retain_inverted_pyramid"): "Inverted_Pyramid.txt",
    ("raw", "retain_listicle"): "Listicle.txt",
}


def _readme_files(folder: Path, config: str, split: str) -> list[Path]:
    """The files the folder's README ``configs:`` maps ``config``/``split`` to (globs expanded; empty if none)."""
    return sorted(p for pattern in readme_data_files(folder, config, split) for p in folder.glob(pattern) if p.is_file())


def release_folder(folder: Path) -> Path | None:
    """The GitHub release's ``data/Prof/`` folder: ``folder`` itself or inside it (a clone of the repository)."""
    for candidate in (folder, folder / "data" / "Prof"):
        if (candidate / RELEASE_FILES[("raw", FORGET_SPLIT)]).is_file():
            return candidate
    return None


def local_files(folder: Path, config: str, split: str) -> list[Path]:
    """The local file(s) of ``config``/``split`` in a folder of DUSK's layout (see the module docstring)."""
    release = release_folder(folder)
    if release is not None and (config, split) in RELEASE_FILES:
        path = release / RELEASE_FILES[(config, split)]
        return [path] if path.is_file() else []
    found = _readme_files(folder, config, split)
    if found:
        return found
    parquet = sorted(folder.glob(f"{config}-*.parquet")) + sorted((folder / "data").glob(f"{config}-*.parquet"))
    if parquet:
        return parquet
    found = split_files(folder, config, (split,), prefer_parquet=True)
    if found:
        return found
    single = local_config_file(folder, config)
    return [single] if single is not None else []


def load_rows(repo_id: str, config: str, split: str, fields: tuple[str, ...], data_dir: str | None = None) -> list[dict]:
    """The rows of one config and split, checked for ``fields`` (a missing or empty one names the file and row)."""
    folder = resolve_local_folder(repo_id, data_dir)
    if folder is None:
        rows, where = load_from_hub(repo_id, config, splits=(split,)).to_list(), f"{repo_id} {config}/{split}"
    else:
        files = local_files(folder, config, split)
        release = release_folder(folder)
        if not files and release is not None:
            raise DataError(f"No file for DUSK {config}/{split} in the release's folder {release}: expected "
                            f"{release / RELEASE_FILES[(config, split)]} (as in the AI-ISL/DUSK repository's data/Prof/).")
        if not files:
            hub_name = f"raw/{split}-00000-of-00001.parquet" if config == "raw" else f"{config}-00000-of-00001.parquet"
            raise DataError(f"No file for DUSK {config}/{split} in {folder}: expected {folder / hub_name} (the Hub's "
                            f"layout: `hf download {repo_id} --repo-type dataset --local-dir {folder}`), the file its "
                            f"README configs name, or {folder / (config + '.jsonl')}.")
        rows = []
        for f in files:
            note_data_source("local", repo_id, f"{config}/{split}", path=f)
        if files[0].suffix == ".parquet":
            rows = read_parquet(files).to_list()
        elif files[0].suffix == ".txt":  # the release's text files: the professors' documents
            rows = [{"text": doc} for f in files for doc in release_text(f).split(DOCUMENT_SEPARATOR)]
        else:
            for f in files:
                rows += read_json_records(f, text_array=True)
        where = str(files[0])
    if not rows:
        raise DataError(f"{where} holds no records.")
    check_rows(rows, fields, where)
    return rows


def config_rows(options: DuskOptions, config: str) -> list[dict]:
    split, fields = CONFIGS[config]
    return load_rows(options.repo_id, config, split, fields, options.local_dir)


def release_text(path: Path) -> str:
    """A text file of the release as its evaluation reads it (``f.read().strip()``)."""
    return read_utf8(path).strip()


def population_text(repo_id: str, config: str, split: str, data_dir: str | None = None) -> str:
    """One text of documents as the release's file holds it: the file itself (stripped) in the release's layout,
    else every row's ``text``, in order, separated by :data:`DOCUMENT_SEPARATOR`."""
    folder = resolve_local_folder(repo_id, data_dir)
    release = release_folder(folder) if folder is not None else None
    if release is not None:
        path = release / RELEASE_FILES[(config, split)]
        if path.is_file():
            note_data_source("local", repo_id, f"{config}/{split}", path=path)
            text = release_text(path)
            if not text:
                raise DataError(f"{path} holds no text.")
            return text
    rows = load_rows(repo_id, config, split, (), data_dir)
    return joined_text(rows, f"DUSK {config}/{split}")


def joined_text(rows: list[dict], where: str) -> str:
    """The release's text of a split's rows, which are either its documents or chunks of its file.

    Documents (one professor each, no surrounding space): joined with :data:`DOCUMENT_SEPARATOR`, as the file
    separates them. Chunks of the file (a row blank, starting with white space or holding a document separator: a
    chunk may begin mid-paragraph, and keeps its own line breaks): joined with nothing, as they were cut. Either way
    the result is the file's text stripped, which is what the release reads."""
    texts = []
    for n, row in enumerate(rows, 1):
        text = row.get("text")
        if not isinstance(text, str):
            raise DataError(f"{where}: row {n} has no 'text' string ({text!r}).")
        texts.append(text)
    if any(not t.strip() or t[:1].isspace() or DOCUMENT_SEPARATOR in t for t in texts):
        joined = "".join(texts).strip()
    else:
        joined = DOCUMENT_SEPARATOR.join(t.strip() for t in texts)
    if not joined:
        raise DataError(f"{where} holds no text.")
    return joined


def raw_text(repo_id: str, split: str, data_dir: str | None = None) -> str:
    """One style's documents as the release's text file holds them (:func:`population_text` of ``raw``)."""
    return population_text(repo_id, "raw", split, data_dir)


def windows(tokenizer, text: str, size: int) -> list[str]:
    """The release's membership-inference passages of a text: its tokens (special tokens added, as the release
    encodes it) cut into whole windows of ``size`` tokens (a shorter rest is dropped), each decoded without special
    tokens."""
    ids = tokenizer(text, add_special_tokens=True)["input_ids"]
    return [tokenizer.decode(ids[i:i + size], skip_special_tokens=True) for i in range(0, len(ids) - size + 1, size)]


def load_tokenizer(options: DuskOptions):
    """The model's tokenizer (``tokenizer`` or ``pretrained`` in the metadata), or None (with a warning)."""
    if options.tokenizer:
        try:
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(options.tokenizer, **(options.tokenizer_kwargs or {}))
        except Exception as e:  # any loading failure: fall back, loudly
            log.warning("DUSK: could not load the tokenizer %r (%s).", options.tokenizer, e)
    return None


def privacy_texts(options: DuskOptions) -> dict[str, list[str]]:
    """The texts of the three populations: ``forget`` (the forget style), ``retain`` (each retain style),
    ``holdout`` (the holdout professors), each one text as the release's file holds it."""
    holdout = population_text(options.repo_id, "eval_holdout", CONFIGS["eval_holdout"][0], options.local_dir)
    return {"forget": [raw_text(options.repo_id, FORGET_SPLIT, options.local_dir)],
            "retain": [raw_text(options.repo_id, s, options.local_dir) for s in RETAIN_SPLITS],
            "holdout": [holdout]}


def privacy_passages(options: DuskOptions, tokenizer) -> dict[str, list[str]]:
    """Each population's passages: the release's token windows (with a tokenizer), else one passage per document."""
    texts = privacy_texts(options)
    if tokenizer is None:
        log.warning("DUSK privacy: no tokenizer (pass pretrained= or tokenizer= in --metadata from Python), so every "
                    "document is one passage instead of the release's %d-token windows.", options.dusk_mia_window)
        return {name: [d for t in group for d in t.split(DOCUMENT_SEPARATOR)] for name, group in texts.items()}
    out = {name: [w for t in group for w in windows(tokenizer, t, options.dusk_mia_window)]
           for name, group in texts.items()}
    empty = [name for name, passages in out.items() if not passages]
    if empty:
        raise DataError(f"DUSK privacy: the {', '.join(empty)} text is shorter than one window of "
                        f"{options.dusk_mia_window} tokens; lower dusk_mia_window.")
    return out


def _doc(set_name: str, index: int, **fields: Any) -> dict[str, Any]:
    doc = {"id": f"{set_name}/{index}", "set": set_name, "index": index, "prompt": "", "reference": "", "question": "",
           "icl_questions": [], "icl_answers": [], "text": ""}
    doc.update(fields)
    return doc


def build_docs(options: DuskOptions, tokenizer=None) -> list[dict[str, Any]]:
    """The documents of one measure (``options.dusk_set``); the privacy passages interleaved across the forget,
    retain and holdout populations so that ``--limit N`` keeps all three."""
    cap = options.max_items_per_split
    if options.dusk_set == "verbatim":
        rows = config_rows(options, "eval_verbatim")[:cap]
        return [_doc("verbatim", i, prompt=str(r["prompt"]), reference=str(r["gt"])) for i, r in enumerate(rows)]
    if options.dusk_set in QA_SETS:
        icl = [(str(r["question"]), str(r["answer"])) for r in config_rows(options, "eval_icl")]
        rows = config_rows(options, QA_SETS[options.dusk_set])[:cap]
        return [_doc(options.dusk_set, i, prompt=knowmem_prompt(str(r["question"]), icl), reference=str(r["answer"]),
                     question=str(r["question"]), icl_questions=[q for q, _ in icl], icl_answers=[a for _, a in icl])
                for i, r in enumerate(rows)]
    passages = privacy_passages(options, tokenizer)
    per_set = [[_doc(f"privacy_{name}", i, text=t) for i, t in enumerate(group[:cap])]
               for name, group in passages.items()]
    return [d for group in itertools.zip_longest(*per_set) for d in group if d is not None]


def load_docs(**metadata: Any) -> datasets.DatasetDict:
    """lm-eval ``custom_dataset`` entry point: metadata (YAML, ``--metadata``, model args) arrives as keywords."""
    import datasets

    from unlearn_tasks.dusk.options import DuskOptions

    options = DuskOptions.from_metadata(metadata)
    tokenizer = load_tokenizer(options) if options.dusk_set == "privacy" else None
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(build_docs(options, tokenizer))})
