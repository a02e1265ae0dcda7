"""Issue 12 (bad-input review): `unlearn run` / `unlearn push` never lose data and say what to fix in one line."""

import pytest
import yaml

import unlearn_methods.methods  # noqa: F401
from fixtures.commands import run_command
from unlearn_app.hub import HubUploadError, push_folder
from unlearn_app.pipeline import run_unlearning
from unlearn_methods.base import UnlearnMethod
from unlearn_methods.config import load_run_config
from unlearn_methods.registry import METHODS, register
from unlearn_methods.run import UnlearningFailed


def _cfg(tmp_path, model_dir, data_dir, name="run", **kw):
    base = dict(method="ga", model=str(model_dir), out=str(tmp_path / name), data_dir=str(data_dir),
                forget="forget01", epochs=1, batch_size=8, lr=1e-3, progress=False)
    base.update(kw)
    return load_run_config(None, **base)


def _copy_model(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


# ------------------------------------------------------------------ item 1: --out never overwrites the model or a folder
@pytest.mark.parametrize("lora", [False, True])
def test_out_equal_to_or_inside_model_is_refused_even_with_overwrite(tmp_path, tiny_model_dir, demo_data_dir, lora):
    model = _copy_model(tiny_model_dir, tmp_path / "m")
    before = {p.name: p.read_bytes() for p in model.iterdir() if p.is_file()}
    for out in (model, model / "unlearned"):
        cfg = load_run_config(None, method="ga", model=str(model), out=str(out), data_dir=str(demo_data_dir),
                              forget="forget01", lora=lora, overwrite=True, progress=False)
        with pytest.raises(UnlearningFailed, match="is the --model folder .* or inside it"):
            run_unlearning(cfg)
    assert {p.name: p.read_bytes() for p in model.iterdir() if p.is_file()} == before
    assert not (model / "adapter_config.json").exists()


def test_non_empty_out_needs_overwrite(tmp_path, tiny_model_dir, demo_data_dir):
    out = tmp_path / "run"
    out.mkdir()
    (out / "README.md").write_text("my notes")
    with pytest.raises(UnlearningFailed, match=r"--out .* is not empty \(README.md\).*--overwrite"):
        run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir))
    assert (out / "README.md").read_text() == "my notes"
    proc = run_command(["unlearn", "run", "--method", "ga", "--model", str(tiny_model_dir), "--out", str(out),
                        "--data-dir", str(demo_data_dir), "--forget", "forget01", "--epochs", "1", "--quiet"])
    assert proc.returncode == 2 and "is not empty" in proc.stderr and "Traceback" not in proc.stderr
    run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, overwrite=True))
    assert (out / "README.md").read_text() != "my notes" and (out / "adapter_model.safetensors").is_file()


def test_unwritable_out_is_one_line(tmp_path, tiny_model_dir, demo_data_dir):
    (tmp_path / "afile").write_text("x")
    proc = run_command(["unlearn", "run", "--method", "ga", "--model", str(tiny_model_dir),
                        "--out", str(tmp_path / "afile" / "sub"), "--data-dir", str(demo_data_dir), "--quiet"])
    assert proc.returncode == 2 and "Cannot write the checkpoint to --out" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_missing_config_and_bad_param_from_the_command_line(tmp_path):
    proc = run_command(["unlearn", "run", "--config", str(tmp_path / "nope.yaml")])
    assert proc.returncode == 2 and "does not exist" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_command(["unlearn", "run", "--model", "m", "--out", str(tmp_path / "o"), "--method", "npo",
                        "--param", "beta=0"])
    assert proc.returncode == 2 and "parameter beta=0.0 is not allowed; expected float > 0" in proc.stderr


# ------------------------------------------------------------------ item 2: --resume only with the same settings
def test_resume_with_other_settings_is_refused_naming_the_differences(tmp_path, tiny_model_dir, demo_data_dir):
    out = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, method="npo"))
    weights = (out / "adapter_model.safetensors").read_bytes()
    with pytest.raises(UnlearningFailed, match=r"--resume: .*method: saved 'npo', now 'ga'.*lr: saved 0.001, now 0.0005"):
        run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, method="ga", lr=5e-4, resume=True))
    assert (out / "adapter_model.safetensors").read_bytes() == weights
    assert yaml.safe_load((out / "unlearn_config.yaml").read_text())["method"] == "npo"
    # the same settings (more epochs) resume
    run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, method="npo", epochs=2, resume=True))
    assert yaml.safe_load((out / "unlearn_config.yaml").read_text())["epochs"] == 2


# ------------------------------------------------------------------ item 11: Ctrl-C says that --resume continues
class _Interrupting(UnlearnMethod):
    name = "test_interrupt"

    def loss(self, ctx, model, inputs):
        raise KeyboardInterrupt


def test_ctrl_c_says_resume_continues(tmp_path, tiny_model_dir, demo_data_dir):
    register(_Interrupting)  # registered for this test only: other tests list the registry's methods
    try:
        with pytest.raises(UnlearningFailed, match=r"Interrupted at step 0.*--resume to continue"):
            run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, method="test_interrupt"))
    finally:
        METHODS.pop("test_interrupt", None)


# ------------------------------------------------------------------ item 10: no absolute paths uploaded; 401 message
def test_card_and_config_hold_no_absolute_paths(tmp_path, tiny_model_dir, demo_data_dir):
    out = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir))
    for name in ("README.md", "unlearn_config.yaml"):
        text = (out / name).read_text()
        for path in (str(tmp_path), str(tiny_model_dir), str(demo_data_dir)):
            assert path not in text, (name, path)
    saved = yaml.safe_load((out / "unlearn_config.yaml").read_text())
    assert saved["out"] == "." and (out / saved["model"]).resolve() == tiny_model_dir.resolve()
    assert (out / saved["data_dir"]).resolve() == demo_data_dir.resolve()
    assert "base_model:" not in (out / "README.md").read_text().split("---")[1]  # local base: no bogus Hub id


def test_push_without_a_valid_token_says_to_log_in(tmp_path, hub_standin, monkeypatch):
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", "hf_invalid")
    hub = hub_standin(fail_creates=99, fail_code=401)
    folder = tmp_path / "ck"
    folder.mkdir()
    (folder / "README.md").write_text("card")
    with pytest.raises(HubUploadError, match=r"(?s)HTTP 401.*HF_TOKEN.*huggingface-cli login.*unlearn push"):
        push_folder(folder, "me/x", endpoint=hub.url, retries=3, backoff_s=0.01)
    creates = [r for r in hub.requests if r[1].startswith("/api/repos/create")]
    assert len(creates) == 1  # no pointless retries
