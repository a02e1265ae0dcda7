"""`unlearn run` as a user meets it: checkpoints lm-eval evaluates as they are, configs, model cards, resume,
NaN handling, repeatability, and the Hub upload against a local stand-in of the Hub API."""

import json

import pytest
import torch
import yaml
from safetensors.torch import load_file

import unlearn_methods.methods  # noqa: F401
from fixtures.commands import run_command, run_unlearn_here
from unlearn_app.checkpoint.hub import HubUploadError, push_folder
from unlearn_app.pipeline import run_unlearning
from unlearn_methods.base import UnlearnMethod
from unlearn_methods.config import load_run_config
from unlearn_methods.registry import METHODS, register
from unlearn_methods.training import UnlearningFailed


def _cfg(tmp_path, model_dir, data_dir, name="run", **kw):
    base = dict(method="graddiff", model=str(model_dir), out=str(tmp_path / name), data_dir=str(data_dir),
                forget="forget01", epochs=2, batch_size=2, lr=1e-3, progress=False)
    base.update(kw)
    return load_run_config(None, **base)


@pytest.mark.slow
def test_adapter_checkpoint_runs_in_lm_eval_cli(tmp_path, tiny_model_dir, demo_data_dir):
    out = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, lora=True))
    assert (out / "adapter_config.json").is_file() and (out / "tokenizer.json").is_file()
    proc = run_command(
        ["lm_eval", "--model", "hf", "--model_args", f"pretrained={tiny_model_dir},peft={out},dtype=float32",
         "--device", "cpu", "--tasks", "tofu_forget01_likelihood", "--limit", "5",
         "--metadata", json.dumps({"data_dir": str(demo_data_dir)})])
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "forget_prob" in proc.stdout


@pytest.mark.slow
def test_merged_checkpoint_with_self_evaluation_in_model_card(tmp_path, tiny_model_dir, demo_data_dir):
    cfg = _cfg(tmp_path, tiny_model_dir, demo_data_dir, lora=True, merge=True, eval_tasks=["tofu_forget01_likelihood"])
    out = run_unlearning(cfg)
    assert (out / "model.safetensors").is_file() and not (out / "adapter_config.json").exists()
    card = (out / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: transformers")  # a local base model has no Hub id to name
    assert str(tiny_model_dir) not in card and f"`{tiny_model_dir.name}`" in card
    for needle in ("graddiff", "forget01", "retain99", "learning rate", "## Evaluation", "forget_prob",
                   "| transformers |", "| peft |", "LoRA (r=8"):
        assert needle in card, needle
    assert list((out / "eval").rglob("results_*.json"))
    assert "model-index:" in card and "name: forget_prob" in card  # the Hub shows the evaluation


def test_yaml_config_with_command_line_overrides_and_resolved_copy(tmp_path, tiny_model_dir, demo_data_dir):
    config = tmp_path / "npo.yaml"
    config.write_text(yaml.safe_dump({"method": "npo", "epochs": 1, "method_params": {"beta": 0.2}, "lora": False}))
    cfg = load_run_config(config, model=str(tiny_model_dir), out=str(tmp_path / "o"), data_dir=str(demo_data_dir),
                      forget="forget01", batch_size=2, progress=False, epochs=2)
    assert cfg.epochs == 2 and cfg.method == "npo"
    out = run_unlearning(cfg)
    saved = yaml.safe_load((out / "unlearn_config.yaml").read_text())
    assert saved["method_params"] == {"beta": 0.2, "gamma": 1.0, "alpha": 1.0, "retain_loss": "nll"}
    assert saved["retain"] == "retain99" and saved["lora"] is False
    with pytest.raises(ValueError, match=r"npo.yaml:1: epoch: unknown option \(did you mean epochs\?\)"):
        config.write_text("epoch: 3\n")
        load_run_config(config)


def _weights(out):
    return load_file(str(out / "model.safetensors"))


def test_same_seed_same_weights(tmp_path, tiny_model_dir, demo_data_dir):
    a = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "a", lora=False))
    b = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "b", lora=False))
    wa, wb = _weights(a), _weights(b)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_resume_continues_from_the_last_checkpoint(tmp_path, tiny_model_dir, demo_data_dir):
    straight = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "straight", lora=False, epochs=2, save_steps=1))
    run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "resumed", lora=False, epochs=1, save_steps=1))
    resumed = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, "resumed", lora=False, epochs=2,
                                  save_steps=1, resume=True))
    history = json.loads((resumed / "train_metrics.json").read_text())["metrics"]
    assert history["epoch"] == 2
    ws, wr = _weights(straight), _weights(resumed)
    assert all(torch.allclose(ws[k], wr[k], atol=1e-6) for k in ws)


@pytest.fixture
def nan_method():
    @register
    class NaNAtStep2(UnlearnMethod):
        name = "test_nan_at_step_2"
        summary = "test only"

        def loss(self, ctx, model, inputs):
            out = model(input_ids=inputs["forget"]["input_ids"], attention_mask=inputs["forget"]["attention_mask"])
            loss = out.logits.float().mean() * 0 + 1.0
            return (loss * float("nan") if ctx.step >= 2 else loss), {}

    yield NaNAtStep2.name
    METHODS.pop(NaNAtStep2.name)


def test_nan_loss_stops_with_a_clear_message_and_keeps_last_good(tmp_path, tiny_model_dir, demo_data_dir, nan_method):
    with pytest.raises(UnlearningFailed, match=r"loss is nan at step 2.*last_good.*--resume"):
        run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, method=nan_method, lora=False, epochs=3))
    keep = tmp_path / "run.partial" / "last_good"  # the run stopped: its folder is still the partial one
    weights = load_file(str(keep / "model.safetensors"))
    assert all(torch.isfinite(w).all() for w in weights.values())
    assert "error" in json.loads((tmp_path / "run.partial" / "train_metrics.json").read_text())
    assert not (tmp_path / "run").exists()


def _files(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_run_stopped_while_saving_never_leaves_a_checkpoint_that_looks_complete(tmp_path, tiny_model_dir,
                                                                                   demo_data_dir, monkeypatch):
    """The weights are saved, then the tokenizer's save fails (a crash, a full disk): OUT does not appear (before:
    config.json and model.safetensors were in OUT), OUT.partial holds the run, a plain rerun is refused, --resume
    completes it; an --overwrite run stopped the same way leaves the earlier OUT byte-identical."""
    from transformers import PreTrainedTokenizerBase

    def crash(self, *args, **kwargs):
        raise OSError("No space left on device")

    out, partial = tmp_path / "run", tmp_path / "run.partial"
    with monkeypatch.context() as m:
        m.setattr(PreTrainedTokenizerBase, "save_pretrained", crash)
        with pytest.raises(OSError, match="No space left"):
            run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, lora=False, epochs=1))
    assert not out.exists()
    assert (partial / "model.safetensors").is_file() and (partial / "checkpoints").is_dir()
    with pytest.raises(UnlearningFailed, match=r"run\.partial holds an unfinished run .*--resume.*--overwrite"):
        run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, lora=False, epochs=1))
    done = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, lora=False, epochs=1, resume=True))
    assert done == out and not partial.exists()
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md", "unlearn_config.yaml"} <= set(
        _files(out))
    before = _files(out)
    with monkeypatch.context() as m:
        m.setattr(PreTrainedTokenizerBase, "save_pretrained", crash)
        with pytest.raises(OSError, match="No space left"):
            run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, lora=False, epochs=1, lr=5e-3,
                                overwrite=True))
    assert _files(out) == before  # the earlier checkpoint, untouched: no file of the stopped run among it
    assert yaml.safe_load((partial / "unlearn_config.yaml").read_text())["lr"] == 5e-3


def test_out_partial_may_not_hold_an_input(tmp_path, capsys):
    """``--out X`` trains in ``X.partial``; with --overwrite that folder is cleared, so it may hold no input."""
    from unlearn_app.cli import main

    data = tmp_path / "run.partial" / "data"
    data.mkdir(parents=True)
    (data / "forget01.json").write_text("precious")
    assert main(["run", "--model", "org/m", "--out", str(tmp_path / "run"), "--data-dir", str(data),
                 "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --out {tmp_path / 'run.partial'} holds the input --data-dir {data}") and (
        err.count("\n") == 1)
    assert (data / "forget01.json").read_text() == "precious"


def test_cli_reports_bad_options(tmp_path, capsys):
    proc = run_unlearn_here(["run", "--method", "nope", "--model", "m", "--out", str(tmp_path)], capsys)
    assert proc.returncode == 2 and "Unknown method 'nope'" in proc.stderr
    proc = run_unlearn_here(["run", "--method", "npo"], capsys)
    assert proc.returncode == 2 and "--model" in proc.stderr


@pytest.fixture
def online(monkeypatch):
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hc, "HF_HUB_DISABLE_XET", True)  # the stand-in speaks Git LFS, not Xet
    monkeypatch.setenv("HF_TOKEN", "hf_secret_test_token_value")


def test_push_to_hub_creates_a_private_repo_in_one_commit(tmp_path, tiny_model_dir, demo_data_dir, online, caplog,
                                                          hub_standin):
    hub = hub_standin(fail_creates=1)  # the first attempt fails: our retry goes on
    out = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, lora=True))
    url = push_folder(out, "me/tofu-graddiff", endpoint=hub.url, backoff_s=0.01)
    repo = hub.repos["me/tofu-graddiff"]
    assert repo["visibility"] == "private" and len(repo["commits"]) == 1 and url.startswith(hub.url)
    assert {"README.md", "adapter_model.safetensors", "unlearn_config.yaml", "tokenizer.json"} <= set(repo["files"])
    assert not any(name.startswith("checkpoints/") for name in repo["files"])
    assert repo["files"]["README.md"] == (out / "README.md").read_bytes()
    assert hub.content("me/tofu-graddiff", "adapter_model.safetensors")[0] == (out / "adapter_model.safetensors").read_bytes()
    assert "adapter_model.safetensors" in repo["lfs"]  # weights travel through Git LFS, as on the real Hub
    for _, path, headers, _ in hub.requests:  # the token travels only in the Authorization header to the Hub
        token = headers.get("Authorization", headers.get("authorization"))
        if path.startswith("/lfs-objects/"):  # ... and never to the LFS object storage
            assert token is None
        else:
            assert token == "Bearer hf_secret_test_token_value"
    saved = b"".join(p.read_bytes() for p in out.iterdir() if p.is_file())
    assert b"hf_secret_test_token_value" not in saved
    assert "hf_secret_test_token_value" not in caplog.text


def test_failed_upload_keeps_the_checkpoint_and_says_how_to_resume(tmp_path, tiny_model_dir, demo_data_dir, online,
                                                                   hub_standin):
    hub = hub_standin(fail_creates=99)
    out = run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, lora=True))
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(HubUploadError, match=r"(?s)after 2 attempts.*intact.*unlearn push .* --repo me/x"):
        push_folder(out, "me/x", endpoint=hub.url, retries=2, backoff_s=0.01)
    assert sorted(p.name for p in out.iterdir()) == before


def test_evaldu_white_box_forgets_a_whole_minimal_set(shared_data, tmp_path, tiny_model_dir):
    from unlearn_methods.forget_retain import evaldu_forget_retain

    kb = shared_data / "deep_unlearning"
    alone, retain = evaldu_forget_retain(str(kb), 272)
    assert alone == [{"question": "Who is Xavier Ross to Zoey Jenkins?", "answer": "husband"}] and len(retain) == 699
    whole, retain = evaldu_forget_retain(str(kb), 272, minimal_set=True)
    assert len(whole) == 4 and alone[0] in whole and len(retain) == 696
    out = run_unlearning(load_run_config(None, method="graddiff", model=str(tiny_model_dir), out=str(tmp_path / "du"),
                                     data="evaldu", data_dir=str(kb), evaldu_target=272, evaldu_minimal_set=True,
                                     epochs=1, batch_size=4, progress=False))
    saved = yaml.safe_load((out / "unlearn_config.yaml").read_text())
    assert saved["forget"] == "evaldu_fact_272_minimal_set"
    with pytest.raises(ValueError, match="--data evaldu needs --data-dir"):
        load_run_config(None, method="ga", model="m", out="o", data="evaldu")


def test_resume_into_a_folder_that_holds_no_run_needs_overwrite(tmp_path, tiny_model_dir, demo_data_dir):
    """The finished folder replaces OUT whole, so --resume may not take a folder of other files for a run."""
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(UnlearningFailed, match=r"--out .* is not empty \(notes.txt\).*--overwrite"):
        run_unlearning(_cfg(tmp_path, tiny_model_dir, demo_data_dir, resume=True))
    assert (out / "notes.txt").read_text() == "mine" and not (tmp_path / "run.partial").exists()
