"""CLEAR configs as records with PIL images, from the Hub (``therem/CLEAR``, loaded at run time, never shipped) or a
local copy in the Hub's layout (``data_dir`` or ``$UNLEARN_DATA_DIR/therem/CLEAR/``): ``<config>/train-*.parquet``
(images as an HF ``Image`` column: bytes and/or path) or ``<config>/train.json[l]`` (images as a file path relative
to the config folder, or ``{"bytes": base64 or raw, "path": ...}``).
"""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path
from typing import Any

from unlearn_tasks.clear.splits import HUB_ID
from unlearn_tasks.dataset_loader import DataError, load_split, resolve_local_folder, split_files

#: The columns each config must have.
REQUIRED = {
    "perturbed": ("image", "caption", "name", "perturbed_captions", "paraphrased_caption", "perturbed_names"),
    "real_faces": ("image", "answer", "options"),
    "real_world": ("image", "question", "answer", "options"),
    "captions": ("image", "caption"),
    "with_text": ("image", "caption", "question", "answer"),
}


def required_columns(config: str) -> tuple[str, ...]:
    if config.endswith("_perturbed"):
        return REQUIRED["perturbed"]
    if config in ("real_faces", "real_world"):
        return REQUIRED[config]
    return REQUIRED["with_text"] if config.endswith("+tofu") else REQUIRED["captions"]


def _open_image(source: Any, what: str):
    """``Image.open`` + ``load``; a corrupt or unknown image is a :class:`DataError` naming ``what``."""
    from PIL import Image

    try:
        img = Image.open(source)
        img.load()
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:  # UnidentifiedImageError is OSError
        raise DataError(f"{what} is not a readable image ({type(e).__name__}: {str(e).splitlines()[0][:200]}).") from None
    return img


def decode_image(value: Any, folder: Path | None, where: str):
    """A PIL image from what a CLEAR file holds: a PIL image, ``{"bytes", "path"}``, raw/base64 bytes or a path."""
    from PIL import Image

    if value is None:
        return None
    if isinstance(value, Image.Image):
        return value
    if isinstance(value, dict):
        data, path = value.get("bytes"), value.get("path")
        if data:
            return decode_image(data, folder, where)
        if path:
            return decode_image(str(path), folder, where)
        raise DataError(f"{where}: an image entry has neither bytes nor a path.")
    if isinstance(value, (bytes, bytearray)):
        return _open_image(io.BytesIO(value), f"{where}: its image bytes ({len(value)} bytes)")
    if isinstance(value, str):
        candidates = [Path(value)] if os.path.isabs(value) else [p / value for p in (folder, folder.parent if folder else None) if p]
        for candidate in candidates:
            if candidate.is_file():
                return _open_image(candidate, f"{where}: image file {candidate}")
        try:
            return decode_image(base64.b64decode(value, validate=True), folder, where)
        except (ValueError, OSError):
            pass
        raise DataError(f"{where}: image {value!r} is not a file (looked in {[str(c) for c in candidates]}) "
                        f"nor base64-encoded image bytes.")
    raise DataError(f"{where}: cannot read an image from a {type(value).__name__}.")


def load_clear(config: str, data_dir: str | os.PathLike | None = None, dataset_path: str = HUB_ID) -> list[dict]:
    """Records of one CLEAR config (split ``train``) with ``image`` decoded to PIL (None for text-only rows)."""
    folder = resolve_local_folder(dataset_path, data_dir)
    files = split_files(folder, config, ["train"]) if folder is not None else []
    where = str(files[0]) if files else f"{dataset_path} config {config!r}"
    records = load_split(dataset_path, config, ["train"], required_columns(config), data_dir)
    base = files[0].parent if files else None
    for n, r in enumerate(records):
        r["image"] = decode_image(r.get("image"), base, f"{where} record {n}")
    return records
