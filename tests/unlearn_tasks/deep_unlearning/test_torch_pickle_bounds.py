"""Issue 12, item 9: crafted ``.pt`` files cannot make the restricted unpickler read outside a tensor's storage
(``as_strided`` without bounds checks read heap memory or crashed with SIGSEGV)."""

import collections
import io
import pickle
import zipfile

import numpy as np
import pytest
import torch

from unlearn_tasks.deep_unlearning.torch_pickle import TorchFileError, load_torch_file

_STORAGE = object()
_FOUR_FLOATS = np.arange(4, dtype="<f4").tobytes()


class _Tensor:
    """Pickles as torch's own tensor rebuild call with the given (possibly hostile) geometry."""

    def __init__(self, offset, size, stride):
        self.args = (offset, size, stride)

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, (_STORAGE, *self.args, False, collections.OrderedDict())


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        return ("storage", torch.FloatStorage, "0", "cpu", 4) if obj is _STORAGE else None


def _pt(tmp_path, obj, storage=_FOUR_FLOATS, name="crafted.pt"):
    buf = io.BytesIO()
    _Pickler(buf, protocol=2).dump(obj)
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", buf.getvalue())
        archive.writestr("archive/data/0", storage)
    return path


def test_a_well_formed_tensor_still_loads(tmp_path):
    out = load_torch_file(_pt(tmp_path, [_Tensor(1, (3,), (1,)), _Tensor(0, (2, 2), (2, 1)), _Tensor(3, (), ())]))
    assert out[0].tolist() == [1.0, 2.0, 3.0] and out[1].tolist() == [[0.0, 1.0], [2.0, 3.0]] and out[2] == 3.0
    real = tmp_path / "real.pt"
    torch.save({"t": torch.arange(6, dtype=torch.float32).reshape(2, 3)[:, 1:]}, real)
    assert load_torch_file(real)["t"].tolist() == [[1.0, 2.0], [4.0, 5.0]]


@pytest.mark.parametrize("offset, size, stride", [
    (0, (1000,), (1,)),            # reads past the end of a 4-element storage
    (2, (3,), (1,)),               # offset + size past the end
    (0, (2,), (10**9,)),           # a huge stride: far outside the heap
    (10**12, (), ()),              # scalar at an absurd offset
    (-1, (2,), (1,)),              # negative offset
    (0, (2,), (-1,)),              # negative stride
    (0, (2, 2), (1,)),             # size and stride of different lengths
    (0, (10**6, 10**6), (0, 0)),   # a broadcast view of 10^12 elements: memory exhaustion
    (0, ("1",), (1,)),             # not integers
])
def test_out_of_bounds_geometry_is_refused_naming_the_file(tmp_path, offset, size, stride):
    path = _pt(tmp_path, [_Tensor(offset, size, stride)])
    with pytest.raises(TorchFileError, match=rf"{path}: not loaded \(UnpicklingError: tensor"):
        load_torch_file(path)


def test_truncated_storage_and_garbage_are_refused(tmp_path):
    path = _pt(tmp_path, [_Tensor(0, (1,), (1,))], storage=b"\x00\x01\x02")
    with pytest.raises(TorchFileError, match="holds 3 bytes, not whole FloatStorage elements"):
        load_torch_file(path)
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"\x80\x02garbage")
    with pytest.raises(TorchFileError, match=rf"{garbage}: not loaded"):
        load_torch_file(garbage)


def test_refused_pickle_is_one_line_in_the_cli(tmp_path):
    from fixtures.commands import run_command

    (tmp_path / "kb").mkdir()
    _pt(tmp_path, [_Tensor(0, (1000,), (1,))], name="kb/family-200-graph.pt")
    (tmp_path / "r.json").write_text("[true]")
    proc = run_command(["unlearn", "deep-unlearning", "score", "--kb", str(tmp_path / "kb"),
                        "--relationships", str(tmp_path / "r.json"), "--target", "1"])
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "family-200-graph.pt: not loaded" in proc.stderr
