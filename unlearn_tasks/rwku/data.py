"""RWKU's data at run time: the Hub (``jinzhuoran/RWKU``) or a local folder in one of its layouts, and the targets.

A local folder (``data_dir`` / ``rwku_data_dir``, or ``$UNLEARN_DATA_DIR/jinzhuoran/RWKU``) is read, per config, from
the first of:

1. the file(s) that the folder's ``README.md`` maps the config to (its ``configs:`` front matter, as on the Hub);
2. ``All/<file>`` (the Hub repository's files: ``All/forget_level1.json``, ``All/intro.json``, ...);
3. the Hub's auto-converted parquet layout: ``<config>/<split>/*.parquet`` or ``<config>/<split>-*.parquet``;
4. the per-target folders ``Target/<n>_<Name>/<file>`` (the release's processed layout), in the order of ``n``.

Targets come from the data's own list (config ``forget_target``, field ``target``), never from a list kept here.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from unlearn_tasks.dataset_loader import (
    DataError,
    check_rows,
    load_from_hub,
    read_local_rows,
    readme_data_files,
    resolve_local_folder,
)

if TYPE_CHECKING:
    import datasets

#: config -> (its split on the Hub, its file name under All/ and Target/<n>_<Name>/)
CONFIGS = {
    "forget_target": ("train", "intro.json"),
    "forget_level1": ("test", "forget_level1.json"),
    "forget_level2": ("test", "forget_level2.json"),
    "forget_level3": ("test", "forget_level3.json"),
    "neighbor_level1": ("test", "neighbor_level1.json"),
    "neighbor_level2": ("test", "neighbor_level2.json"),
    "mia_forget": ("test", "forget_mia.json"),
    "mia_retain": ("test", "retain_mia.json"),
    "utility_fluency": ("test", "fluency.json"),
    # the release's training corpora (per model; the file names are those of its processed Target/ folders)
    "train_positive_llama3": ("train", "positive.json"),
    "train_positive_phi3": ("train", "positive_phi.json"),
    "train_pair_llama3": ("train", "pair.json"),
    "train_pair_phi3": ("train", "pair_phi.json"),
    "train_refusal_llama3": ("train", "reject.json"),
    "train_refusal_phi3": ("train", "reject_phi.json"),
}
PROBE = ("subject", "query", "answer")
#: the fields each config's rows need (a missing or empty one is an error naming the file, the row and the field)
FIELDS = {
    "forget_target": ("target",),
    "forget_level1": PROBE, "forget_level2": PROBE, "forget_level3": (*PROBE, "type"),
    "neighbor_level1": PROBE, "neighbor_level2": PROBE,
    "mia_forget": ("subject", "text"), "mia_retain": ("subject", "text"),
    "utility_fluency": ("subject", "instruction"),
    **{f"train_positive_{m}": ("subject", "text") for m in ("llama3", "phi3")},
    **{f"train_pair_{m}": ("subject", "prompt") for m in ("llama3", "phi3")},  # and response: [chosen, rejected]
    **{f"train_refusal_{m}": ("subject", "instruction", "output") for m in ("llama3", "phi3")},
}
#: fields holding a list of texts (checked as such)
LIST_FIELDS = {f"train_pair_{m}": ("response",) for m in ("llama3", "phi3")}
_TARGET_FOLDER = re.compile(r"(\d+)_(.+)")


def _readme_paths(folder: Path, config: str) -> list[Path]:
    """The files the folder's README ``configs:`` maps ``config`` to (empty if no README or no such entry)."""
    return [folder / p for p in readme_data_files(folder, config)]


def _target_folders(folder: Path) -> list[Path]:
    """``Target/<n>_<Name>/`` folders in the order of ``n``."""
    base = folder / "Target"
    found = [(int(m.group(1)), p) for p in base.iterdir() if p.is_dir() and (m := _TARGET_FOLDER.fullmatch(p.name))] \
        if base.is_dir() else []
    return [p for _, p in sorted(found)]


def _local_files(folder: Path, config: str) -> list[Path]:
    split, name = CONFIGS[config]
    mapped = _readme_paths(folder, config)
    if mapped and all(p.is_file() for p in mapped):
        return mapped
    if (folder / "All" / name).is_file():
        return [folder / "All" / name]
    for base in (folder / config, folder / "data" / config):
        parquet = sorted((base / split).glob("*.parquet")) + sorted(base.glob(f"{split}-*.parquet"))
        if parquet:
            return parquet
    return [p / name for p in _target_folders(folder) if (p / name).is_file()]


def _read_local(folder: Path, config: str, repo_id: str) -> tuple[list[dict], str]:
    files = _local_files(folder, config)
    if not files:
        split, name = CONFIGS[config]
        raise DataError(f"No file for RWKU config {config!r} in {folder}: expected {folder / 'All' / name} (or the "
                        f"file its README configs name, {folder / config / split}/*.parquet, or "
                        f"{folder / 'Target'}/<n>_<Name>/{name}).")
    rows = read_local_rows(files, repo_id, config)
    where = str(files[0]) if len(files) == 1 else f"{files[0].parent.parent}/*/{files[0].name}"
    return rows, where


def load_rows(config: str, repo_id: str, data_dir: str | None = None) -> list[dict]:
    """The rows of one RWKU config, checked for the fields :data:`FIELDS` names."""
    folder = resolve_local_folder(repo_id, data_dir)
    if folder is not None:
        rows, where = _read_local(folder, config, repo_id)
    else:
        rows, where = load_from_hub(repo_id, config, splits=(CONFIGS[config][0],)).to_list(), f"{repo_id} {config}"
    if not rows:
        raise DataError(f"{where} holds no records.")
    check_rows(rows, FIELDS[config], where, LIST_FIELDS.get(config, ()))
    return rows


def target_list(repo_id: str, data_dir: str | None = None) -> list[str]:
    """The unlearning targets in the data's own order (``forget_target``), each once."""
    return list(dict.fromkeys(str(r["target"]).strip() for r in load_rows("forget_target", repo_id, data_dir)))


def select_targets(known: list[str], wanted: list[str] | None, option: str = "rwku_targets") -> list[str]:
    """The targets ``wanted`` names (names, or 1-based positions / ranges in ``known``'s order); all if None.
    ``option`` is how error messages name the setting (``--target`` for ``unlearn run``)."""
    if wanted is None:
        return list(known)
    chosen: list[str] = []
    for item in wanted:
        if re.fullmatch(r"\d+(-\d+)?", item):
            first, _, last = item.partition("-")
            lo, hi = int(first), int(last or first)
            if not 1 <= lo <= hi <= len(known):
                raise DataError(f"{option}: {item!r} is outside 1-{len(known)} (the data's forget_target list).")
            chosen += known[lo - 1:hi]
        elif item in known:
            chosen.append(item)
        else:
            close = difflib.get_close_matches(item, known, n=3)
            hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
            raise DataError(f"{option}: {item!r} is not a target of the data's forget_target list{hint}.")
    return list(dict.fromkeys(chosen))


def type_slug(attack: str) -> str:
    """A level-3 attack type as a metric-name part: ``"affirmative suffix"`` -> ``affirmative_suffix``."""
    return re.sub(r"[^0-9a-z]+", "_", attack.strip().lower()).strip("_") or "untyped"


def build_docs(options: Any) -> list[dict[str, Any]]:
    """The documents of one RWKU set for the selected targets: probes (subject, query, answer, level, type),
    fluency instructions, or for ``mia`` the forget and retain member texts (interleaved, so ``--limit N`` keeps
    both)."""
    targets = select_targets(target_list(options.repo_id, options.local_dir), options.rwku_targets)
    wanted = set(targets)
    configs = ["mia_forget", "mia_retain"] if options.rwku_set == "mia" else [options.rwku_set]
    per_config = []
    for config in configs:
        rows = [r for r in load_rows(config, options.repo_id, options.local_dir) if str(r["subject"]).strip() in wanted]
        covered = {str(r["subject"]).strip() for r in rows}
        missing = [t for t in targets if t not in covered]
        if options.rwku_targets is not None and rows and missing:  # a requested target is never silently left out
            raise DataError(f"RWKU {config}: no records for the requested target(s) {missing[:5]}"
                            f"{' ...' if len(missing) > 5 else ''}, so the set's mean would leave them out; select "
                            "targets that every evaluated set covers.")
        if options.max_items_per_split:
            rows = rows[: options.max_items_per_split]
        if not rows:
            raise DataError(f"RWKU {config}: no records for the selected target(s) {targets[:5]}"
                            f"{' ...' if len(targets) > 5 else ''}.")
        per_config.append([_doc(config, i, r) for i, r in enumerate(rows)])
    if len(per_config) == 1:
        return per_config[0]
    return [d for pair in zip(*per_config) for d in pair] + [d for group in per_config
                                                              for d in group[min(map(len, per_config)):]]


def _doc(config: str, index: int, row: dict) -> dict[str, Any]:
    attack = str(row.get("type") or "") if config == "forget_level3" else ""
    return {"id": f"{config}/{index}", "set": config, "index": index, "subject": str(row["subject"]).strip(),
            "query": str(row.get("query") or ""), "answer": str(row.get("answer") or ""),
            "type": attack, "type_slug": type_slug(attack) if attack else "", "text": str(row.get("text") or ""),
            "instruction": str(row.get("instruction") or "")}


def load_docs(**metadata: Any) -> datasets.DatasetDict:
    """lm-eval ``custom_dataset`` entry point: metadata (YAML, ``--metadata``, model args) arrives as keywords."""
    import datasets

    from unlearn_tasks.rwku.options import RwkuOptions

    docs = build_docs(RwkuOptions.from_metadata(metadata))
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})
