"""Issue 12 (bad-input review): `unlearn run` / `unlearn push` never lose data and say what to fix in one line."""

import pytest
import yaml

import unlearn_methods.methods  # noqa: F401
from fixtures.commands import run_unlearn_here
from unlearn_app.checkpoint.hub import HubUploadError, push_folder
from unlearn_app.pipeline import run_unlearning
from unlearn_methods.base import UnlearnMethod
from unlearn_methods.config import load_run_config
from unlearn_methods.registry import METHODS, register
from unlearn_methods.training import UnlearningFailed


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


def test_non_empty_out_needs_overwrite(tmp_path, tiny_model_dir, demo_data_dir, capsys):
    out = tmp_path / "run"
    out.mkdir()
    (out / "README.md").write_text("my notes")
    with pytest.raises(UnlearningFailed, match=r"--out .* is not empty \(README.md\).*--overwrite"):
        run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir))
    assert (out / "README.md").read_text() == "my notes"
    proc = run_unlearn_here(["run", "--method", "ga", "--model", str(tiny_model_dir), "--out", str(out),
                             "--data-dir", str(demo_data_dir), "--forget", "forget01", "--epochs", "1", "--quiet"], capsys)
    assert proc.returncode == 2 and "is not empty" in proc.stderr and "Traceback" not in proc.stderr
    run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, overwrite=True))
    assert (out / "README.md").read_text() != "my notes" and (out / "adapter_model.safetensors").is_file()


def test_unwritable_out_is_one_line(tmp_path, tiny_model_dir, demo_data_dir, capsys):
    (tmp_path / "afile").write_text("x")
    proc = run_unlearn_here(["run", "--method", "ga", "--model", str(tiny_model_dir),
                             "--out", str(tmp_path / "afile" / "sub"), "--data-dir", str(demo_data_dir), "--quiet"], capsys)
    assert proc.returncode == 2 and "Cannot write the checkpoint to --out" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_missing_config_and_bad_param_from_the_command_line(tmp_path, capsys):
    proc = run_unlearn_here(["run", "--config", str(tmp_path / "nope.yaml")], capsys)
    assert proc.returncode == 2 and "does not exist" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_unlearn_here(["run", "--model", "m", "--out", str(tmp_path / "o"), "--method", "npo",
                             "--param", "beta=0"], capsys)
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
    # issue 29: fewer epochs would rewrite the saved config of a run that trained more
    with pytest.raises(UnlearningFailed, match=r"epochs: saved 2.0, now 1.0 \(--resume may add epochs, not remove"):
        run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, method="npo", epochs=1, resume=True))
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
    with pytest.raises(HubUploadError, match=r"(?s)HTTP 401.*HF_TOKEN.*hf auth login.*unlearn push"):
        push_folder(folder, "me/x", endpoint=hub.url, retries=3, backoff_s=0.01)
    creates = [r for r in hub.requests if r[1].startswith("/api/repos/create")]
    assert len(creates) == 1  # no pointless retries


# --------------------------------------------------------------------------- issue 29: the second review
def _one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, (needle, err)


def test_klom_inputs_that_are_not_numeric_npy_arrays(tmp_path, capsys):
    import numpy as np

    from unlearn_app.cli import main

    np.save(tmp_path / "o.npy", np.ones((2, 4)))
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.save(tmp_path / "str.npy", np.array(["a", "b"]))
    (tmp_path / "text.npy").write_text("hello")
    cases = {"obj.npy": "it holds pickled Python objects", "str.npy": "holds <U1 values, not numbers",
             "text.npy": "not numpy's .npy format"}
    for name, message in cases.items():
        code = main(["klom", "--unlearned", str(tmp_path / name), "--oracle", str(tmp_path / "o.npy"),
                     "--out", str(tmp_path / f"r_{name}.json"), "--quiet"])
        _one_line_error(code, capsys.readouterr().err, str(tmp_path / name), message)


def test_margins_gather_and_margins_name_what_to_pass(tmp_path, capsys):
    import json

    from unlearn_app.cli import main

    record = {"format": "unlearning_margins/1", "reduction": "mean", "margins": [0.1, 0.2],
              "splits": {"forget": [0]}, "sample_hash": "abc"}
    for i in range(2):
        run = tmp_path / "runs" / f"r{i}"
        run.mkdir(parents=True)
        (run / f"results_2026-01-0{i + 1}T00-00-00.json").write_text(json.dumps(
            {"results": {}, "configs": {"margins_x": {"task": "margins_x", "unlearning_margins": record}}}))
    code = main(["margins", "gather", str(tmp_path / "runs"), "--out", str(tmp_path / "g.npy")])
    _one_line_error(code, capsys.readouterr().err, "holds results of 2 runs", "pass the folder or results file")
    code = main(["margins", "gather", str(tmp_path / "runs" / "r0"), str(tmp_path / "runs" / "r1"),
                 "--out", str(tmp_path / "g.json")])  # would have been written as g.json.npy
    _one_line_error(code, capsys.readouterr().err, "--out", "must end in .npy")
    assert main(["margins", "gather", str(tmp_path / "runs" / "r0"), str(tmp_path / "runs" / "r1"),
                 "--out", str(tmp_path / "g.npy")]) == 0
    assert "2 models x 2 samples" in capsys.readouterr().out and (tmp_path / "g.npy").is_file()
    data = tmp_path / "d.json"
    data.write_text('{"prompt": "a", "target": "b"}\n')
    for missing in ("/nonexistent/model", "./no_such_folder/"):
        code = main(["margins", "--model", missing, "--data", str(data), "--out", str(tmp_path / "m.npy")])
        _one_line_error(code, capsys.readouterr().err, f"--model {missing} is neither a local folder nor a Hub id")


def test_attack_report_repeated_names_and_an_out_folder(tmp_path, capsys):
    import json

    from unlearn_app.cli import main

    runs = {}
    for name, value in (("u", 0.2), ("q", 0.35), ("q2", 0.4)):
        runs[name] = tmp_path / name
        runs[name].mkdir()
        (runs[name] / "results_2026-01-01T00-00-00.json").write_text(
            json.dumps({"results": {"tofu_forget10": {"forget_prob,none": value}}}))
    base = ["attack", "report", "--unlearned", str(runs["u"]), "--metrics", "tofu_forget10/forget_prob"]
    code = main([*base, "--attacked", f"int4={runs['q']}", "--attacked", f"int4={runs['q2']}",
                 "--out", str(tmp_path / "r")])
    _one_line_error(code, capsys.readouterr().err, "--attacked names 'int4' twice")
    reports = tmp_path / "reports"
    reports.mkdir()
    assert main([*base, "--attacked", f"int4={runs['q']}", "--out", f"{reports}/"]) == 0
    assert sorted(p.name for p in reports.iterdir()) == ["attack_report.json", "attack_report.md", "attack_report.png"]
    assert not (tmp_path / "reports.md").exists()  # not beside the folder


@pytest.mark.parametrize("name", ["npo.partial", "npo.partial-4242-0a1b2c3d"])
def test_push_refuses_an_unfinished_run_folder_and_leaves_it_as_it_was(tmp_path, capsys, name):
    """`unlearn run --out npo` trains in npo.partial (the attack and demo writers in npo.partial-PID-XXXX) and
    renames it when the checkpoint is complete: pushing one is refused in one line before anything is written into
    it (no model-index in its card) or sent (no Hub is reachable here), naming the folder to push instead."""
    from unlearn_app.cli import main

    folder = tmp_path / name
    (folder / "eval").mkdir(parents=True)
    (folder / "README.md").write_text("card")
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    assert main(["push", str(folder), "--repo", "me/x"]) == 2
    _one_line_error(2, capsys.readouterr().err, str(folder), "unfinished run", f"push {tmp_path / 'npo'} ", "--resume")
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before
    assert (folder / "README.md").read_text() == "card"
    with pytest.raises(HubUploadError, match="unfinished run"):  # and the Python entry point too
        push_folder(folder, "me/x", endpoint="http://127.0.0.1:9")


def test_push_of_a_missing_folder_is_one_line(tmp_path, capsys):
    from unlearn_app.cli import main

    assert main(["push", str(tmp_path / "nothing"), "--repo", "me/x"]) == 2
    _one_line_error(2, capsys.readouterr().err, "no such folder")
