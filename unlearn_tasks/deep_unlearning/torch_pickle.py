"""Read ``torch.save`` files (zip or legacy format) without torch and without executing pickled code.

The unpickler resolves only a short whitelist of globals: container builtins, ``collections.OrderedDict``,
numpy array/dtype/scalar reconstruction, torch tensor reconstruction (re-implemented here on numpy), and any
class named ``Person`` or ``Rule`` (the upstream Eval-DU classes), which become inert attribute holders.
Anything else raises :class:`pickle.UnpicklingError` naming the refused global.
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

_STUB_CLASS_NAMES = ("Person", "Rule")

_TORCH_STORAGE_DTYPES: dict[str, np.dtype] = {
    "BoolStorage": np.dtype(np.bool_),
    "ByteStorage": np.dtype(np.uint8),
    "CharStorage": np.dtype(np.int8),
    "ShortStorage": np.dtype("<i2"),
    "IntStorage": np.dtype("<i4"),
    "LongStorage": np.dtype("<i8"),
    "HalfStorage": np.dtype("<f2"),
    "FloatStorage": np.dtype("<f4"),
    "DoubleStorage": np.dtype("<f8"),
    "UntypedStorage": np.dtype(np.uint8),
}


class PickledObject:
    """Inert stand-in for a pickled user class: keeps the pickled attributes, runs no code."""

    pickled_class: str = ""

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2:  # (dict, slots) form
            state = {**(state[0] or {}), **(state[1] or {})}
        if not isinstance(state, dict):
            raise pickle.UnpicklingError(f"unexpected state for {self.pickled_class}: {type(state).__name__}")
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"<{self.pickled_class} {sorted(self.__dict__)}>"


def _stub_class(module: str, name: str) -> type:
    return type(name, (PickledObject,), {"pickled_class": f"{module}.{name}"})


class _StorageType:
    """Marker for a torch storage class named in a persistent id."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dtype = _TORCH_STORAGE_DTYPES[name]


#: Largest tensor rebuilt from a file (elements); Eval-DU's are a few thousand.
MAX_TENSOR_ELEMENTS = 1 << 28


def _ints(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise pickle.UnpicklingError(f"tensor {what} must be a tuple of integers, got {value!r}")
    return tuple(value)


def _rebuild_tensor(storage: np.ndarray, offset: int, size: tuple, stride: tuple, *_unused: Any) -> np.ndarray:
    """numpy equivalent of torch's tensor rebuild: a strided view of the storage, copied. Offset, shape and strides
    are checked against the storage first, so a crafted file cannot read outside it."""
    if not isinstance(storage, np.ndarray) or storage.ndim != 1:
        raise pickle.UnpicklingError("tensor storage must come from the archive")
    size, stride = _ints(size, "size"), _ints(stride, "stride")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise pickle.UnpicklingError(f"tensor storage offset must be a non-negative integer, got {offset!r}")
    if len(size) != len(stride) or any(v < 0 for v in size + stride):
        raise pickle.UnpicklingError(f"tensor size {size} and stride {stride} must be non-negative and of equal length")
    numel = int(np.prod(size, dtype=object)) if size else 1
    if numel > MAX_TENSOR_ELEMENTS:
        raise pickle.UnpicklingError(f"tensor of {numel} elements is larger than this reader allows")
    if numel == 0:
        return np.empty(size, dtype=storage.dtype)
    last = offset + sum((n - 1) * st for n, st in zip(size, stride))
    if last >= storage.size:
        raise pickle.UnpicklingError(
            f"tensor (offset {offset}, size {size}, stride {stride}) reaches element {last} of a storage of "
            f"{storage.size}; the file is corrupt or crafted"
        )
    if not size:
        return storage[offset].copy()
    strides = tuple(s * storage.itemsize for s in stride)
    view = np.lib.stride_tricks.as_strided(storage[offset:], shape=size, strides=strides, writeable=False)
    return np.array(view)


def _safe_reconstructor(cls: type, base: type, state: Any) -> Any:
    if not (isinstance(cls, type) and issubclass(cls, PickledObject)) or base is not object:
        raise pickle.UnpicklingError(f"refused copyreg reconstruction of {cls!r}")
    return object.__new__(cls)


def _latin1_encode(text: str, encoding: str = "utf-8") -> bytes:
    """``_codecs.encode`` as protocol-2 pickles use it to carry bytes; nothing else."""
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"refused _codecs.encode with encoding {encoding!r}")
    return text.encode("latin1")


_ALLOWED: dict[tuple[str, str], Any] = {
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("builtins", "complex"): complex,
    ("builtins", "slice"): slice,
    ("builtins", "bytearray"): bytearray,
    ("__builtin__", "set"): set,
    ("__builtin__", "frozenset"): frozenset,
    ("_codecs", "encode"): _latin1_encode,
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("copyreg", "_reconstructor"): _safe_reconstructor,
    ("copy_reg", "_reconstructor"): _safe_reconstructor,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
}
_NUMPY_MULTIARRAY = ("numpy.core.multiarray", "numpy._core.multiarray")
_NUMPY_FUNCTIONS = ("_reconstruct", "scalar")


def _numpy_function(name: str) -> Any:
    for module in reversed(_NUMPY_MULTIARRAY):
        try:
            mod = __import__(module, fromlist=[name])
            return getattr(mod, name)
        except (ImportError, AttributeError):
            continue
    raise pickle.UnpicklingError(f"numpy lacks {name}")


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that allows only whitelisted globals and serves torch storages from ``storages``."""

    def __init__(self, file: io.BufferedIOBase, storages: dict[str, bytes] | None = None) -> None:
        super().__init__(file, encoding="latin1")
        self._storages = storages or {}
        self._stubs: dict[tuple[str, str], type] = {}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        if module in _NUMPY_MULTIARRAY and name in _NUMPY_FUNCTIONS:
            return _numpy_function(name)
        if module == "torch" and name in _TORCH_STORAGE_DTYPES:
            return _StorageType(name)
        if name in _STUB_CLASS_NAMES:
            return self._stubs.setdefault((module, name), _stub_class(module, name))
        raise pickle.UnpicklingError(
            f"refused to load global {module}.{name}: only plain data, numpy arrays, torch tensors and the "
            f"Eval-DU Person/Rule classes are allowed; convert this file to JSON instead"
        )

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and pid and pid[0] == "storage" and len(pid) >= 5):
            raise pickle.UnpicklingError(f"unsupported persistent id {pid!r}")
        storage_type, key = pid[1], str(pid[2])
        if not isinstance(storage_type, _StorageType):
            raise pickle.UnpicklingError(f"unsupported storage type {storage_type!r}")
        if key not in self._storages:
            raise pickle.UnpicklingError(f"storage {key} missing from the archive")
        data = self._storages[key]
        if len(data) % storage_type.dtype.itemsize:
            raise pickle.UnpicklingError(f"storage {key} holds {len(data)} bytes, not whole {storage_type.name} elements")
        return np.frombuffer(data, dtype=storage_type.dtype)


class TorchFileError(pickle.UnpicklingError, ValueError):
    """A ``.pt`` file that was refused or could not be read; the message names the file and why."""


def load_torch_file(path: str | Path) -> Any:
    """Load a ``torch.save`` file (zip format, or legacy / plain pickle) with :class:`RestrictedUnpickler`.
    Refused or unreadable files raise :class:`TorchFileError` naming the file."""
    path = Path(path)
    try:
        return _load(path)
    except TorchFileError:
        raise
    except (pickle.UnpicklingError, EOFError, zipfile.BadZipFile, ValueError, TypeError, KeyError, IndexError,
            AttributeError, OverflowError, MemoryError) as e:
        raise TorchFileError(f"{path}: not loaded ({type(e).__name__}: {e}).") from None


def _load(path: Path) -> Any:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            pickles = [n for n in names if n == "data.pkl" or n.endswith("/data.pkl")]
            if not pickles:
                raise TorchFileError(f"{path}: zip archive without data.pkl; not a torch.save file")
            prefix = pickles[0][: -len("data.pkl")]
            storages = {
                n[len(prefix) + len("data/"):]: archive.read(n)
                for n in names
                if n.startswith(prefix + "data/") and not n.endswith("/")
            }
            return RestrictedUnpickler(io.BytesIO(archive.read(pickles[0])), storages).load()
    with path.open("rb") as handle:
        data = handle.read()
    stream = io.BytesIO(data)
    first = RestrictedUnpickler(stream).load()
    if isinstance(first, int) and first == 0x1950A86A20F9469CFC6C:  # legacy torch magic number
        RestrictedUnpickler(stream).load()  # protocol version
        RestrictedUnpickler(stream).load()  # sys info
        return RestrictedUnpickler(stream).load()  # legacy tensors would need their storages: unsupported
    return first
