"""The compiled MT19937 kernel (:mod:`.mt19937`) as machine code cached on disk, loaded with llvmlite alone.

numba is needed only to build the kernel: importing numba and loading a kernel from numba's own cache costs about
0.6 s of CPU per process (numba's CPU target context imports ``scipy.linalg``), several times the kernel's own work
for a few hundred texts. So the kernel's C entry point is compiled once by numba, its object file stored next to the
kernel's source (``__pycache__``; ``NUMBA_CACHE_DIR`` when set, or the user cache folder where the package is
read-only) and later loaded into llvmlite's JIT linker and called through ctypes (about 0.03 s).

The cache file names the source it was built from, the Python, numba and llvmlite builds and the CPU (name, features, any
``NUMBA_CPU_NAME``/``NUMBA_CPU_FEATURES``): a file built from anything else is never used, and is rebuilt.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

_SOURCE = Path(__file__).with_name("mt19937.py")
_N_STATE = 624
_FORMAT = 1
_I64P = ctypes.POINTER(ctypes.c_int64)
_U32P = ctypes.POINTER(ctypes.c_uint32)
_U64P = ctypes.POINTER(ctypes.c_uint64)
_SIGNATURE = ctypes.CFUNCTYPE(None, ctypes.c_int64, _I64P, ctypes.c_int64, _I64P, _I64P, ctypes.c_int64, _I64P,
                              ctypes.c_int64, _U32P, _U64P, _I64P, _U32P)
_engines: list = []  # keeps the JIT linker (and so the machine code) alive with the process


def _package_version_file(name: str, file: str) -> bytes:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return b""
    try:
        return (Path(next(iter(spec.submodule_search_locations))) / file).read_bytes()
    except OSError:
        return b""


def _key() -> dict:
    """What the machine code depends on (the cache file must carry exactly this)."""
    import llvmlite.binding as llvm

    return {
        "format": _FORMAT,
        "python": sys.implementation.cache_tag,
        "source": hashlib.sha256(_SOURCE.read_bytes()).hexdigest(),
        "numba": hashlib.sha256(_package_version_file("numba", "_version.py")).hexdigest(),
        "llvmlite": hashlib.sha256(_package_version_file("llvmlite", "_version.py")).hexdigest(),
        "cpu": llvm.get_host_cpu_name(),
        "features": llvm.get_host_cpu_features().flatten(),
        "cpu_env": [os.environ.get("NUMBA_CPU_NAME", ""), os.environ.get("NUMBA_CPU_FEATURES", "")],
        "triple": llvm.get_process_triple(),
    }


def cache_dirs() -> list[Path]:
    """Where the cache file is looked for and written, in order (numba's rules for its own cache)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return [Path(os.environ["NUMBA_CACHE_DIR"]) / "lm_eval_unlearning"]
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return [_SOURCE.parent / "__pycache__", Path(xdg) / "lm-eval-unlearning"]


def _file_name(key: dict) -> str:
    return "mt19937-kernel-" + hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20] + ".bin"


def _read(key: dict) -> tuple[bytes, dict] | None:
    name = _file_name(key)
    for folder in cache_dirs():
        try:
            header, _, obj = (folder / name).read_bytes().partition(b"\n")
            meta = json.loads(header)
        except (OSError, ValueError):
            continue
        if meta.get("key") == key and len(obj) == meta.get("size"):
            return obj, meta
    return None


def _write(key: dict, obj: bytes, meta: dict) -> None:
    data = json.dumps({**meta, "key": key, "size": len(obj)}, sort_keys=True).encode() + b"\n" + obj
    for folder in cache_dirs():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".mt19937-kernel-", delete=False) as f:
                f.write(data)
            os.chmod(f.name, 0o644)
            os.replace(f.name, folder / _file_name(key))  # atomic: a concurrent reader sees all or nothing
            return
        except OSError:
            continue


def _build(key: dict) -> tuple[bytes, dict]:
    from . import mt19937

    obj, symbol, externals = mt19937.compile_object()
    meta = {"symbol": symbol, "externals": externals}
    _write(key, obj, meta)
    return obj, meta


def _link(obj: bytes, meta: dict) -> Callable:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # numba's error path around the call (Python's C API, numba's helpers) is never taken: the kernel raises
    # nothing. Symbols this process lacks (numba's, when numba is not imported) resolve to Py_FatalError (aborts).
    abort = ctypes.cast(ctypes.pythonapi.Py_FatalError, ctypes.c_void_p).value
    for name in meta["externals"]:
        if not llvm.address_of_symbol(name):
            llvm.add_symbol(name, abort)
    machine = llvm.Target.from_default_triple().create_target_machine()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine)
    engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    address = engine.get_function_address(meta["symbol"])
    if not address:
        raise RuntimeError(f"the cached kernel has no symbol {meta['symbol']}")
    _engines.append(engine)
    return _SIGNATURE(address)


@functools.lru_cache(maxsize=1)
def kernel() -> Callable | None:
    """The kernel's C entry point (see :func:`.mt19937.compile_object`), from the cache or built now; None where
    neither numba nor a usable cache file is here."""
    if importlib.util.find_spec("llvmlite") is None:
        return None
    key = _key()
    cached = _read(key)
    if cached is None:
        if importlib.util.find_spec("numba") is None:
            return None
        try:
            cached = _build(key)
        except ImportError:  # numba present but unusable (e.g. a numpy it does not support)
            return None
    return _link(*cached)


def available() -> bool:
    """Whether the compiled kernel can run here."""
    return kernel() is not None


def positions(ids: np.ndarray, prevs: np.ndarray, offsets: np.ndarray, targets: np.ndarray, vocab_size: int) -> np.ndarray:
    """Compiled, single-threaded equivalent of :func:`.permutation.keyed_positions` (inputs validated)."""
    fn = kernel()
    if fn is None:
        raise RuntimeError("the compiled kernel needs numba: pip install 'lm-eval-unlearning[waterdrum]'")
    ids, prevs, offsets, targets = (np.ascontiguousarray(a, dtype=np.int64) for a in (ids, prevs, offsets, targets))
    n = int(vocab_size)
    out = np.empty((len(ids), len(targets)), dtype=np.uint32)
    mt = np.empty(_N_STATE, dtype=np.uint64)
    buf = np.empty(_N_STATE, dtype=np.int64)
    arr = np.empty(n, dtype=np.uint32)
    fn(len(ids), ids.ctypes.data_as(_I64P), len(prevs), prevs.ctypes.data_as(_I64P), offsets.ctypes.data_as(_I64P),
       len(targets), targets.ctypes.data_as(_I64P), n, out.ctypes.data_as(_U32P), mt.ctypes.data_as(_U64P),
       buf.ctypes.data_as(_I64P), arr.ctypes.data_as(_U32P))
    return out
