"""Issue 29: the own-reference check compares weights exactly (a full sha256 per weight file, cached by size and
mtime), not 16 sampled blocks, and its message says what was compared."""

import hashlib
import json
import os
import shutil

import pytest

from harness_ext import provenance
from unlearn_tasks import reference_logs
from unlearn_tasks.reference_logs import ReferenceLogError, find_records, model_identity, same_model, why_same


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def _model(folder, data: bytes):
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(data)
    (folder / "config.json").write_text("{}")
    return folder


def test_a_change_outside_the_old_sampled_blocks_is_another_model(tmp_path):
    size = 16 * 65536
    weights = bytearray(b"\x01" * size)
    a = _model(tmp_path / "a", bytes(weights))
    weights[size // 16 * 3 + 5000] ^= 0xFF  # a byte the old 16 x 4 KiB sampling never read
    b = _model(tmp_path / "b", bytes(weights))
    copy = shutil.copytree(a, tmp_path / "copy")
    ida, idb, idcopy = (model_identity({"pretrained": str(p)}) for p in (a, b, copy))
    assert not same_model(ida, idb)
    assert why_same(ida, idcopy) == "identical weights (sha256 of every weight file compared)"
    expected = hashlib.sha256(f"model.safetensors:{hashlib.sha256(bytes(weights)).hexdigest()}\n".encode()).hexdigest()
    assert reference_logs._fingerprint(str(b)) == expected  # independently derived


def test_the_full_hash_is_cached_by_size_and_mtime(tmp_path, monkeypatch):
    f = _model(tmp_path / "m", b"abc" * 1000) / "model.safetensors"
    calls = []
    real = provenance.file_sha256
    monkeypatch.setattr(provenance, "file_sha256", lambda p, *a: calls.append(p) or real(p, *a))
    first = provenance.cached_file_sha256(f)
    assert first == hashlib.sha256(b"abc" * 1000).hexdigest() and len(calls) == 1
    assert provenance.cached_file_sha256(f) == first and len(calls) == 1  # read once
    cache = json.loads(provenance.hash_cache_file().read_text())
    assert cache[str(f.resolve())][2] == first
    f.write_bytes(b"abd" * 1000)  # same size: the new mtime says it changed
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10**9))
    assert provenance.cached_file_sha256(f) == hashlib.sha256(b"abd" * 1000).hexdigest() and len(calls) == 2
    provenance.hash_cache_file().write_text("{broken")  # an unreadable cache is ignored, then rewritten
    assert provenance.cached_file_sha256(f) == hashlib.sha256(b"abd" * 1000).hexdigest()


def test_the_refusal_says_what_was_compared(tmp_path):
    model = _model(tmp_path / "m", b"w" * 5000)
    copy = shutil.copytree(model, tmp_path / "copy")
    record = {"format": "lm-eval-unlearning/tofu-reference/1", "split": "forget01",
              "model": model_identity({"pretrained": str(copy)})}
    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "results_2026-01-01T00-00-00.json").write_text(
        json.dumps({"configs": {"t": {"unlearning_reference": record}}}))
    with pytest.raises(ReferenceLogError, match=r"it would be its own reference \(identical weights "
                                                r"\(sha256 of every weight file compared\)\)"):
        find_records(tmp_path / "ref", lambda r: True, label="TOFU",
                     evaluated_model=model_identity({"pretrained": str(model)}))
