"""BLUR's data at run time: the Hub (``forgelab/BLUR``) or a local folder in its layout.

The release is a set of files at the repository's top: per source benchmark (``rwku``, ``whp``, ``wmdp``, ``tofu``)
``<source>_forget.json``, ``<source>_retain.json`` and ``<source>_paired_forget_retain.json`` (the combined
forget+retain queries), whichever the release has for that source, each a list of ``{"text": query}``; and the
relearning sets ``<source>_D_hi.json``, ``<source>_D_mid.json`` and ``D_lo_for_all.json`` (texts, from the most to the
least related to the forget set). A local folder (``data_dir`` / ``blur_data_dir``, or
``$UNLEARN_DATA_DIR/forgelab/BLUR``) is read from the first of: the file the folder's ``README.md`` ``configs:`` maps
the file's stem to; ``<stem>.json`` / ``<stem>.jsonl``; the parquet layout ``<stem>/train/*.parquet`` or
``<stem>/train-*.parquet``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness_ext.provenance import note_data_source
from unlearn_tasks.blur.options import HUB_ID, PROMPT, RELEARN_LEVELS, RELEARN_SOURCES, SETS, SOURCES
from unlearn_tasks.dataset_loader import (
    DataError,
    check_rows,
    read_json_records,
    read_parquet,
    readme_data_files,
    resolve_local_folder,
)

if TYPE_CHECKING:
    import datasets


def stem(source: str, query_set: str) -> str:
    """The file stem of a source's query set: ``rwku_forget``, ``tofu_paired_forget_retain``."""
    return f"{source}_{SETS[query_set]}"


def relearn_stem(source: str, level: str) -> str:
    """The file stem of a relearning set: ``rwku_D_hi``, ``rwku_D_mid``, ``D_lo_for_all``."""
    if source not in SOURCES or level not in RELEARN_LEVELS:
        raise DataError(f"BLUR relearning set {source}:{level}: the sources are {', '.join(SOURCES)} and the levels "
                        f"{', '.join(RELEARN_LEVELS)}.")
    if level != "lo" and source not in RELEARN_SOURCES:
        raise DataError(f"BLUR relearning set {source}:{level}: the release has {level} sets for "
                        f"{', '.join(RELEARN_SOURCES)} only; {source} has the shared lo set (blur:{source}:lo).")
    return "D_lo_for_all" if level == "lo" else f"{source}_D_{level}"


def _readme_paths(folder: Path, name: str) -> list[Path]:
    return [folder / p for p in readme_data_files(folder, name)]


def local_files(folder: Path, name: str) -> list[Path]:
    """The local file(s) of one BLUR file stem (empty if none)."""
    mapped = [p for p in _readme_paths(folder, name) if p.is_file()]
    if mapped:
        return mapped
    for suffix in (".json", ".jsonl"):
        if (folder / f"{name}{suffix}").is_file():
            return [folder / f"{name}{suffix}"]
    return sorted((folder / name / "train").glob("*.parquet")) + sorted((folder / name).glob("train-*.parquet"))


def _read(files: list[Path]) -> list[dict]:
    rows: list[dict] = []
    for f in files:
        if f.suffix == ".parquet":
            rows += read_parquet([f]).to_list()
        else:
            rows += read_json_records(f)
    return rows


def hub_file(repo_id: str, name: str) -> Path:
    """``<name>.json`` of the Hub repository, downloaded (cached by huggingface_hub)."""
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(repo_id, f"{name}.json", repo_type="dataset"))
    except Exception as e:  # offline, missing file, gated: one line that says what to do
        raise DataError(f"Could not fetch {name}.json from the Hub dataset {repo_id} ({type(e).__name__}); give a local "
                        "copy with data_dir (or $UNLEARN_DATA_DIR/forgelab/BLUR).") from None


def load_texts(name: str, repo_id: str = HUB_ID, data_dir: str | None = None) -> tuple[list[str], str]:
    """The ``text`` of every row of one BLUR file (by stem), and where it was read."""
    folder = resolve_local_folder(repo_id, data_dir)
    if folder is not None:
        files = local_files(folder, name)
        if not files:
            raise DataError(f"No file for BLUR's {name} in {folder}: expected {folder / name}.json (or the file its "
                            f"README configs name, or {folder / name}/train/*.parquet).")
        note_data_source("local", repo_id, name, path=files[0])
    else:
        files = [hub_file(repo_id, name)]
        note_data_source("hub", repo_id, name, path=files[0])
    rows = _read(files)
    where = str(files[0])
    if not rows:
        raise DataError(f"{where} holds no records.")
    check_rows(rows, ("text",), where)
    return [str(r["text"]) for r in rows], where


def relearn_file(spec: str, data_dir: str | None = None, repo_id: str = HUB_ID) -> Path:
    """The file of a relearning set named ``blur:<source>:<level>`` (level ``hi``, ``mid`` or ``lo``), local or
    downloaded from the Hub."""
    parts = spec.split(":")
    if len(parts) != 3 or parts[0] != "blur":
        raise DataError(f"{spec!r}: a BLUR relearning set is named blur:SOURCE:LEVEL, e.g. blur:rwku:hi "
                        f"(sources {', '.join(SOURCES)}; levels {', '.join(RELEARN_LEVELS)}).")
    name = relearn_stem(parts[1], parts[2])
    folder = resolve_local_folder(repo_id, data_dir)
    if folder is None:
        return hub_file(repo_id, name)
    files = local_files(folder, name)
    if len(files) != 1:
        raise DataError(f"No single file for BLUR's relearning set {name} in {folder}: expected {folder / name}.json.")
    return files[0]


def prompt(question: str) -> str:
    """The release's generation prompt around a query."""
    return PROMPT.format(question)


def build_docs(options: Any, references: dict[str, dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """The documents of one source's query sets (interleaved, so ``--limit N`` keeps every set), each with the base
    model's answer from ``references`` (``{file stem: {query: answer}}``; empty without)."""
    per_set = []
    for query_set in options.blur_sets:
        name = stem(options.blur_source, query_set)
        texts, where = load_texts(name, options.repo_id, options.local_dir)
        if options.max_items_per_split:
            texts = texts[: options.max_items_per_split]
        answers = (references or {}).get(name, {})
        if references is not None:
            missing = [t for t in texts if t not in answers]
            if missing:
                raise DataError(f"{len(missing)} of the {len(texts)} queries of {name} ({where}) have no base-model "
                                f"answer in the references (first: {missing[0][:80]!r}); write them for this data "
                                "with `unlearn blur-references`.")
        per_set.append([{"id": f"{name}/{i}", "set": query_set, "file": name, "index": i, "question": t,
                         "reference": answers.get(t, "")} for i, t in enumerate(texts)])
    shortest = min(map(len, per_set))
    return [d for group in zip(*per_set) for d in group] + [d for group in per_set for d in group[shortest:]]


def load_docs(**metadata: Any) -> datasets.DatasetDict:
    """lm-eval ``custom_dataset`` entry point: metadata (YAML, ``--metadata``, model args) arrives as keywords."""
    import datasets

    from unlearn_tasks.blur.options import BlurOptions
    from unlearn_tasks.blur.references import load_references

    options = BlurOptions.from_metadata(metadata)
    references = None if options.blur_generate_only else load_references(options.blur_references, options).answers
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(build_docs(options, references))})
