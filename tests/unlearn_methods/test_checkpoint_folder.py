"""A checkpoint folder appears complete or not at all: written under ``NAME.partial...`` and renamed when complete
(unlearn_methods/checkpoint_folder.py), for every writer of a model folder."""

import os
import stat

import pytest

from unlearn_methods import checkpoint_folder


def _listing(path):
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())}


def test_the_folder_appears_only_when_complete_and_replaces_an_earlier_one_whole(tmp_path):
    out = tmp_path / "ckpt"
    out.mkdir()
    (out / "config.json").write_text("old")
    (out / "adapter_config.json").write_text("old adapter")  # an earlier LoRA run: must not survive a full one
    with checkpoint_folder.writing(out) as folder:
        assert folder.parent == tmp_path and folder.name.startswith("ckpt.partial-")
        (folder / "config.json").write_text("new")
        assert _listing(out) == {"adapter_config.json": b"old adapter", "config.json": b"old"}  # untouched so far
    assert _listing(out) == {"config.json": b"new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]  # nothing left beside it


def test_an_error_while_writing_leaves_the_earlier_folder_and_no_partial(tmp_path):
    out = tmp_path / "ckpt"
    out.mkdir()
    (out / "model.safetensors").write_bytes(b"good weights")
    with pytest.raises(KeyboardInterrupt):
        with checkpoint_folder.writing(out) as folder:
            (folder / "model.safetensors").write_bytes(b"half")
            raise KeyboardInterrupt
    assert _listing(out) == {"model.safetensors": b"good weights"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    with pytest.raises(RuntimeError):
        with checkpoint_folder.writing(tmp_path / "new"):
            raise RuntimeError("crash")
    assert not (tmp_path / "new").exists()


def test_the_published_folder_has_the_usual_permissions(tmp_path):
    (tmp_path / "plain").mkdir()
    with checkpoint_folder.writing(tmp_path / "ckpt"):
        pass
    mode = stat.S_IMODE(os.stat(tmp_path / "ckpt").st_mode)
    assert mode == stat.S_IMODE(os.stat(tmp_path / "plain").st_mode)


def test_partial_path_is_the_fixed_sibling(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert checkpoint_folder.partial_path("runs/npo/") == tmp_path / "runs" / "npo.partial"
    assert checkpoint_folder.partial_path(".") == tmp_path.with_name(tmp_path.name + ".partial")


def test_quantize_stopped_while_saving_leaves_no_checkpoint(tmp_path, tiny_model_dir, monkeypatch):
    """Before: the weights and config.json were in OUT when the tokenizer's save failed (a folder that looked like
    a checkpoint); now OUT does not exist and nothing is left beside it."""
    from transformers import PreTrainedTokenizerBase

    from unlearn_methods.attacks.quantize import quantize_checkpoint

    def crash(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(PreTrainedTokenizerBase, "save_pretrained", crash)
    with pytest.raises(KeyboardInterrupt):
        quantize_checkpoint(tiny_model_dir, tmp_path / "q", bits=8)
    assert os.listdir(tmp_path) == []
    monkeypatch.undo()
    quantize_checkpoint(tiny_model_dir, tmp_path / "q", bits=8)
    assert {"config.json", "model.safetensors", "tokenizer.json", "quantization.json"} <= set(os.listdir(tmp_path / "q"))
    assert os.listdir(tmp_path) == ["q"]
