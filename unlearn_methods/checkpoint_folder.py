"""A checkpoint folder appears complete or not at all.

Everything that writes a model folder (``unlearn run --out``, ``unlearn attack quantize|relearn --out``, the models
the demos fine-tune, the SmolLM2 conversion, the scaffolding's tiny models) writes it under a temporary sibling
``NAME.partial...`` and renames that to ``NAME`` when its last file is written (:func:`writing`; a rename within a
folder is atomic). A crash, a kill or Ctrl-C therefore leaves ``NAME.partial...`` beside an untouched ``NAME`` (the
earlier checkpoint, or nothing), never a ``NAME`` holding part of a checkpoint. An existing ``NAME`` (``--overwrite``)
is replaced as a whole by :func:`publish`, so no file of the earlier checkpoint is left among the new one's.

``unlearn run`` trains in ``NAME.partial`` (:func:`partial_path`, a fixed name so that ``--resume`` finds its
checkpoints after a crash) and publishes it when the weights are saved.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

#: What a folder being written is called: ``NAME`` + this (``unlearn run``), or + this + ``-XXXX`` (the others).
PARTIAL = ".partial"
#: The resolved run configuration ``unlearn run`` saves in its checkpoint folder (named here, in a module without
#: torch, so that a command reading a checkpoint folder can tell one without importing the training stack).
CONFIG_FILE = "unlearn_config.yaml"


def _absolute(out: str | os.PathLike) -> Path:
    """``out`` made absolute without resolving symbolic links (``.`` has a name then)."""
    return Path(os.path.abspath(os.path.expanduser(out)))


def partial_path(out: str | os.PathLike) -> Path:
    """The fixed sibling ``NAME.partial`` that ``unlearn run`` trains in before it becomes ``out``."""
    out = _absolute(out)
    return out.with_name(out.name + PARTIAL)


def publish(partial: Path, out: str | os.PathLike) -> Path:
    """Rename the complete folder ``partial`` to ``out``. An existing ``out`` is first renamed aside and removed
    afterwards, so ``out`` is at every moment the earlier checkpoint, the new one, or absent. Returns ``out``."""
    out = _absolute(out)
    if out.exists() or out.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.replaced-", dir=out.parent))
        os.replace(out, old / out.name)
        os.replace(partial, out)
        shutil.rmtree(old)
    else:
        os.replace(partial, out)
    return out


@contextlib.contextmanager
def writing(out: str | os.PathLike) -> Iterator[Path]:
    """A new empty folder beside ``out`` (``NAME.partial-XXXX``, unique, so builds of one folder running at once do
    not meet) to write the checkpoint into; renamed to ``out`` (:func:`publish`) when the block ends without error,
    removed when it raises."""
    out = _absolute(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f"{out.name}{PARTIAL}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    partial.mkdir()  # with the usual permissions (mkdtemp's would make the checkpoint private)
    try:
        yield partial
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    publish(partial, out)
