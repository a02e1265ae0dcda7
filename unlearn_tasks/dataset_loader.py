"""The one loader for every data source: a Hub dataset id or a local directory in, a validated
``datasets.Dataset`` out. Tasks and unlearning methods both call it; nothing else opens dataset files.

Where a config is looked for, in order:
1. ``data_dir`` (an explicit folder laid out like the Hub repository: one ``<config>.json`` / ``.jsonl`` file
   of JSON lines, or a JSON array, per config; what ``hf download REPO --repo-type dataset
   --local-dir DIR`` gives);
2. ``$UNLEARN_DATA_DIR/<repo_id>/`` (one sub-folder per Hub id, e.g. ``$UNLEARN_DATA_DIR/locuslab/TOFU/``);
3. the Hugging Face Hub (``datasets.load_dataset(repo_id, config)``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from harness_ext.provenance import note_data_source

if TYPE_CHECKING:
    import datasets

DATA_DIR_ENV = "UNLEARN_DATA_DIR"
LOCAL_SUFFIXES = (".json", ".jsonl")
#: A Hugging Face Hub repository id as users write one: NAME or ORG/NAME (ASCII letters, digits, ``-``, ``_``, ``.``).
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?", re.ASCII)


def can_name_dataset(value: str) -> bool:
    """Whether ``value`` can name a dataset: a Hub id, or an existing local path (checked before anything loads)."""
    return bool(HUB_ID.fullmatch(value)) or Path(value).expanduser().exists()


class DataError(ValueError):
    """A dataset is missing, unreadable, or lacks a field the benchmark needs. The message says what to fix."""


def read_utf8(path: str | os.PathLike) -> str:
    """The text of a data file, or a :class:`DataError` naming it when it is not UTF-8 (or cannot be read)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{path} is not UTF-8 text (byte {e.object[e.start]:#04x} at offset {e.start}); save it as "
                        "UTF-8.") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read it ({e.strerror or e}).") from None


class JsonLine(NamedTuple):
    """One non-blank line of a JSON-lines file."""

    number: int  #: 1-based line number in the file
    text: str  #: the line without surrounding whitespace
    value: Any  #: its JSON value (the text itself for a plain-text line where ``plain_text`` is set)


def read_json_lines(path: str | os.PathLike, *, text: str | None = None,
                    error: Callable[[int, json.JSONDecodeError], Exception] | None = None,
                    plain_text: bool = False) -> list[JsonLine]:
    """The one JSON-lines reader: every non-blank line of ``path`` (``text``: its content, already read), values of
    any JSON type. A line that is not JSON raises ``error(number, json_error)`` (default: a :class:`DataError`
    naming the file and the line), or with ``plain_text`` is kept as its text."""
    if text is None:
        text = read_utf8(path)
    lines = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            if plain_text:
                value = line
            elif error is not None:
                raise error(number, e) from None
            else:
                raise DataError(f"{path}: line {number} is not valid JSON ({e.msg}).") from None
        lines.append(JsonLine(number, line, value))
    return lines


def read_json_records(path: Path, hint: str = "", text_array: bool = True) -> list[dict]:
    """Records of a JSON-lines file or a JSON array of objects; ``text_array`` also takes an array of strings (as
    ``{"text": ...}``, MUSE's release files). A :class:`DataError` names the file and line; ``hint`` ends it."""
    text = read_utf8(path).strip()
    if not text:
        return []
    if text[0] == "[":
        try:
            records = json.loads(text)
        except json.JSONDecodeError as e:
            raise DataError(f"{path} is not valid JSON ({e.msg}, line {e.lineno}).") from None
        if text_array and records and all(isinstance(r, str) for r in records):
            records = [{"text": r} for r in records]
    else:
        records = [line.value for line in read_json_lines(path, text=text)]
    if not all(isinstance(r, dict) for r in records):
        raise DataError(f"{path}: expected one JSON object per record{hint}.")
    return records


def _mixed_types(records: list[dict]) -> str | None:
    """The first row whose field has another type than most rows have there, as a message."""
    from collections import Counter

    def kind(value) -> str:
        return "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__

    counts: dict[str, Counter] = {}
    for row in records:
        for key, value in row.items():
            if value is not None:
                counts.setdefault(key, Counter())[kind(value)] += 1
    for n, row in enumerate(records, 1):
        for key, value in row.items():
            usual = counts[key].most_common(1)[0][0] if key in counts else None
            if value is not None and kind(value) != usual:
                return f"row {n} has {key!r} of type {kind(value)} ({value!r}) where the other rows have {usual}."
    return None


def local_config_file(folder: str | os.PathLike, config: str) -> Path | None:
    """The file holding ``config`` inside a Hub-like folder, or None."""
    folder = Path(folder)
    for suffix in LOCAL_SUFFIXES:
        for candidate in (folder / f"{config}{suffix}", folder / "data" / f"{config}{suffix}"):
            if candidate.is_file():
                return candidate
    return None


def readme_data_files(folder: Path, config: str, split: str | None = None) -> list[str]:
    """The path patterns a folder's ``README.md`` front matter maps ``config`` to (its ``configs:`` list, as on the
    Hub: ``data_files`` one path, a list of paths, or a list of ``{split, path}``), relative to the folder: every
    entry's, or with ``split`` only those of that split. Empty when the folder has no README, no front matter or no
    such config."""
    import yaml

    readme = folder / "README.md"
    if not readme.is_file():
        return []
    match = re.match(r"---\s*\n(.*?)\n---", read_utf8(readme), flags=re.S)
    if not match:
        return []
    try:
        front = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as e:
        raise DataError(f"{readme}: its front matter is not valid YAML ({e}).") from None
    for entry in (front.get("configs") or []) if isinstance(front, dict) else []:
        if isinstance(entry, dict) and entry.get("config_name") == config:
            patterns: list[str] = []
            data_files = entry.get("data_files") or []
            for files in [data_files] if isinstance(data_files, str) else data_files:
                if split is not None and not (isinstance(files, dict) and files.get("split") == split):
                    continue
                given = files.get("path") if isinstance(files, dict) else files
                patterns += [given] if isinstance(given, str) else list(given or [])
            return patterns
    return []


def resolve_local_folder(repo_id: str, data_dir: str | os.PathLike | None = None) -> Path | None:
    """The local folder to read ``repo_id`` from, if the user named one (argument or environment)."""
    if data_dir:
        folder = Path(data_dir).expanduser()
        if not folder.is_dir():
            raise DataError(f"data_dir {folder} (the local copy of {repo_id}; or its benchmark's own *_data_dir) does "
                            "not exist or is not a directory.")
        return folder
    root = os.environ.get(DATA_DIR_ENV)
    if root:
        folder = Path(root).expanduser() / repo_id
        if folder.is_dir():
            return folder
    return None


def validate_columns(ds: datasets.Dataset, required: Iterable[str], where: str) -> datasets.Dataset:
    """``ds`` itself, or a :class:`DataError` naming ``where`` and the missing columns."""
    missing = [c for c in required if c not in ds.column_names]
    if missing:
        raise DataError(
            f"{where} lacks the column(s) {missing}; it has {ds.column_names}. "
            f"Each record needs the fields {list(required)}."
        )
    return ds


def hub_revision(ds: datasets.Dataset) -> str | None:
    """The Hub commit a loaded dataset was downloaded from (read from its download URLs), else its fingerprint."""
    for url in (ds.info.download_checksums or {}):
        match = re.search(r"(?:@|/resolve/)([0-9a-f]{40})", str(url))
        if match:
            return match.group(1)
    fingerprint = getattr(ds, "_fingerprint", None)
    return f"fingerprint:{fingerprint}" if fingerprint else None


def source_name(repo_id: str, config: str, data_dir: str | os.PathLike | None = None) -> str:
    """Where ``config`` is read from, for messages: the local file, or ``repo_id config 'x'``."""
    folder = resolve_local_folder(repo_id, data_dir)
    path = local_config_file(folder, config) if folder is not None else None
    return str(path) if path else f"{repo_id} config {config!r}"


def check_rows(rows: Sequence[dict], text_fields: Iterable[str], where: str,
               list_fields: Iterable[str] = ()) -> None:
    """Every row has a non-empty string in each of ``text_fields`` and, in each of ``list_fields``, a non-empty string
    or list of non-empty strings; otherwise a :class:`DataError` names ``where``, the row (1-based) and the field."""
    text_fields, list_fields = list(text_fields), list(list_fields)
    for n, row in enumerate(rows, 1):
        for name in text_fields:
            value = row.get(name)
            if not isinstance(value, str) or not value.strip():
                raise DataError(f"{where}: row {n} has {'no' if value is None else 'an empty or non-text'} "
                                f"{name!r} ({value!r}); every row needs a non-empty text in {text_fields + list_fields}.")
        for name in list_fields:
            value = row.get(name)
            values = [value] if isinstance(value, str) else value
            if not isinstance(values, list) or not values or not all(isinstance(v, str) and v.strip() for v in values):
                raise DataError(f"{where}: row {n} has no usable {name!r} ({value!r}); it needs a non-empty text or "
                                "a list of non-empty texts.")


def load_from_hub(repo_id: str, config: str, token: str | None = None, splits: Iterable[str] = ()) -> datasets.Dataset:
    """One config from the Hub: the first of ``splits`` that exists (default: ``train``, else the first split).

    Hub failures become a :class:`DataError` that says what to do (gated dataset, offline, missing config).
    """
    import datasets

    try:
        loaded = datasets.load_dataset(repo_id, config, token=token)
    except Exception as e:  # the Hub raises many types; turn each into an actionable message
        text = f"{type(e).__name__}: {e}"
        if "gated" in text.lower() or "401" in text or "403" in text:
            raise DataError(
                f"The Hugging Face dataset {repo_id} is gated. Accept its terms at "
                f"https://huggingface.co/datasets/{repo_id} with your account, then log in "
                f"(`hf auth login`) or set HF_TOKEN, and run again. ({text})"
            ) from e
        raise DataError(
            f"Could not load config {config!r} of {repo_id} from the Hugging Face Hub ({text}). "
            f"Offline? Download it once (`hf download {repo_id} --repo-type dataset --local-dir DIR`) "
            f"and pass data_dir=DIR (lm_eval: --metadata '{{\"data_dir\": \"DIR\"}}'), or set "
            f"{DATA_DIR_ENV} to a folder holding {repo_id}/."
        ) from e
    if not isinstance(loaded, datasets.DatasetDict):
        note_data_source("hub", repo_id, config, revision=hub_revision(loaded))
        return loaded
    wanted = list(splits)
    for split in wanted or ["train", next(iter(loaded))]:
        if split in loaded:
            note_data_source("hub", repo_id, config, revision=hub_revision(loaded[split]))
            return loaded[split]
    raise DataError(f"{repo_id} config {config!r} has no split {wanted}; it has {list(loaded)}.")


def load_config(
    repo_id: str,
    config: str,
    required_columns: Iterable[str] = (),
    data_dir: str | os.PathLike | None = None,
    token: str | None = None,
) -> datasets.Dataset:
    """Load one config of a dataset (Hub id or local folder) and check it has ``required_columns``."""
    required = list(required_columns)
    folder = resolve_local_folder(repo_id, data_dir)
    if folder is not None:
        path = local_config_file(folder, config)
        if path is None:
            raise DataError(
                f"No file for config {config!r} in {folder}: expected {folder / (config + '.json')} "
                f"(JSON lines, one record per line, as on the Hub repository {repo_id})."
            )
        records = read_json_records(path)
        if not records:
            raise DataError(f"{path} holds no records.")
        note_data_source("local", repo_id, config, path=path)
        import datasets

        try:
            table = datasets.Dataset.from_list(records)
        except (TypeError, ValueError) as e:  # pyarrow's ArrowInvalid / ArrowTypeError are ValueError / TypeError
            raise DataError(f"{path}: {_mixed_types(records) or e}") from None
        return validate_columns(table, required, str(path))
    ds = load_from_hub(repo_id, config, token)
    return validate_columns(ds, required, f"{repo_id} config {config!r}")


def read_parquet(files: Sequence[Path]) -> datasets.Dataset:
    """Parquet shards as one dataset; a shard that is not parquet, or shards with no row at all, give a one-line
    :class:`DataError` naming the file."""
    import datasets
    import pyarrow.parquet as pq

    rows = 0
    for f in files:
        try:
            rows += pq.ParquetFile(str(f)).metadata.num_rows
        except (OSError, ValueError) as e:  # pyarrow's ArrowInvalid is a ValueError
            raise DataError(f"{f} is not a readable parquet file ({str(e).splitlines()[0][:200]}).") from None
    if rows == 0:
        raise DataError(f"{files[0]} holds no records (0 rows" + (f" in all {len(files)} shards)." if len(files) > 1
                                                                   else ")."))
    try:
        return datasets.Dataset.from_parquet([str(f) for f in files])
    except Exception as e:  # datasets wraps the cause in DatasetGenerationError
        cause = e.__cause__ or e
        raise DataError(f"{', '.join(map(str, files))}: cannot be read as one table "
                        f"({type(cause).__name__}: {str(cause).splitlines()[0][:200] if str(cause) else ''}).") from None


def read_local_rows(files: Sequence[Path], repo_id: str, config: str) -> list[dict]:
    """The records of a benchmark's local files in order (JSON / JSON lines, or parquet), each noted as a data
    source of ``repo_id``/``config``."""
    rows: list[dict] = []
    for f in files:
        note_data_source("local", repo_id, config, path=f)
        if f.suffix == ".parquet":
            rows += read_parquet([f]).to_list()
        else:
            rows += read_json_records(f, text_array=False)
    return rows


def split_files(folder: Path, config: str, splits: Sequence[str], prefer_parquet: bool = False) -> list[Path]:
    """Local file(s) of ``config``/``split`` (the first of ``splits`` found) in a Hub-like folder: ``<config>/<split>.json``
    or ``.jsonl``, or the Hub's parquet shards ``<config>/<split>-*.parquet`` (also under ``data/``). JSON wins
    unless ``prefer_parquet`` (for Hub repositories that also keep older JSON files beside the parquet ones)."""
    for name in splits:
        for base in (folder / config, folder / "data" / config):
            if not base.is_dir():
                continue
            found = local_config_file(base, name)
            parquet = sorted(base.glob(f"{name}-*.parquet")) + sorted(base.glob(f"{name}.parquet"))
            if parquet and (prefer_parquet or found is None):
                return parquet
            if found is not None:
                return [found]
    return []


def load_split(repo_id: str, config: str, splits: Sequence[str], required: Iterable[str] = (),
               data_dir: str | os.PathLike | None = None, prefer_parquet: bool = False) -> list[dict]:
    """Records of one split of a config with several splits (first existing name of ``splits``), as plain dicts,
    from a local Hub-like folder (:func:`split_files`) or the Hub; checked for ``required`` columns."""
    required = list(required)
    folder = resolve_local_folder(repo_id, data_dir)
    if folder is None:
        table = load_from_hub(repo_id, config, splits=splits)
        return validate_columns(table, required, f"{repo_id} {config}/{splits[0]}").to_list()
    files = split_files(folder, config, splits, prefer_parquet)
    if not files:
        raise DataError(
            f"No file for {repo_id} config {config!r}, split {splits[0]!r} in {folder}: expected "
            f"{folder / config / (splits[0] + '.json')} (JSON lines or a JSON array; .jsonl also accepted) or the Hub's "
            f"{folder / config / (splits[0] + '-00000-of-00001.parquet')} "
            f"(`hf download {repo_id} --repo-type dataset --local-dir {folder}`)."
        )
    if files[0].suffix == ".parquet":
        for f in files:
            note_data_source("local", repo_id, f"{config}/{splits[0]}", path=f)
        table = read_parquet(files)
        return validate_columns(table, required, str(files[0])).to_list()
    return load_config(repo_id, files[0].stem, required, data_dir=files[0].parent).to_list()
