"""Issue 29 item 6: a checkpoint travels to the Hub the way a real one does (weights over 10 MB through Git LFS: the
batch call, then the object upload), survives an upload broken half-way, and comes back by its repo id."""

import hashlib
import json

import numpy as np
import pytest

from fixtures.commands import run_command
from fixtures.hub import LFS_THRESHOLD
from unlearn_app.checkpoint.hub import HubUploadError, push_folder


@pytest.fixture
def online(monkeypatch):
    import huggingface_hub.constants as hc

    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hc, "HF_HUB_DISABLE_XET", True)  # the stand-in speaks Git LFS, not Xet
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")


def _folder(tmp_path):
    folder = tmp_path / "ckpt"
    folder.mkdir()
    rng = np.random.default_rng(0)
    (folder / "model.safetensors").write_bytes(rng.bytes(LFS_THRESHOLD + 12345))  # over the LFS threshold
    (folder / "extra.bin").write_bytes(rng.bytes(1000))  # small, but an LFS pattern
    (folder / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (folder / "README.md").write_text("card\n")
    return folder


def test_lfs_upload_broken_half_way_resumes_with_nothing_lost_or_duplicated(tmp_path, hub_standin, online):
    from huggingface_hub import hf_hub_download

    folder = _folder(tmp_path)
    big = (folder / "model.safetensors").read_bytes()
    oid = hashlib.sha256(big).hexdigest()
    hub = hub_standin(fail_lfs_uploads=99)  # every object upload breaks half-way
    with pytest.raises(HubUploadError, match=r"(?s)after 2 attempts.*intact.*Resume with: unlearn push .* --repo me/m"):
        push_folder(folder, "me/m", endpoint=hub.url, retries=2, backoff_s=0.01)
    broken = [p for p in hub.lfs_puts if not p[2]]
    assert broken and all(0 < got < LFS_THRESHOLD + 12345 for o, got, _ in broken if o == oid)  # half arrived
    assert hub.lfs == {} and hub.repos["me/m"]["commits"] == []  # nothing half-stored, nothing committed
    preupload = [json.loads(body) for m, path, _, body in hub.requests if "/preupload/" in path]
    assert preupload and {f["path"] for f in preupload[0]["files"]} >= {"model.safetensors", "config.json"}

    hub.fail_lfs_uploads = 1  # the resume: the first object breaks again, our retry sends it once more
    push_folder(folder, "me/m", endpoint=hub.url, retries=3, backoff_s=0.01)
    repo = hub.repos["me/m"]
    assert len(repo["commits"]) == 1 and set(repo["lfs"]) == {"model.safetensors", "extra.bin"}
    assert repo["lfs"]["model.safetensors"] == oid and hub.lfs[oid] == big  # nothing lost
    completed = [o for o, _, done in hub.lfs_puts if done]
    assert sorted(completed) == sorted(set(completed)) and len(completed) == 2  # each object stored once
    for name in ("model.safetensors", "extra.bin", "config.json", "README.md"):  # back by repo id, byte-identical
        got = hf_hub_download("me/m", name, endpoint=hub.url, cache_dir=tmp_path / "cache")
        assert open(got, "rb").read() == (folder / name).read_bytes(), name

    # Pushing the same folder again uploads no object: the batch call answers "already stored".
    puts = len(hub.lfs_puts)
    push_folder(folder, "me/m", endpoint=hub.url, retries=1, backoff_s=0.01)
    assert len(hub.lfs_puts) == puts


@pytest.mark.slow
def test_unlearn_run_push_resume_then_lm_eval_by_repo_id(tmp_path, hub_standin, demo_data_dir, tiny_model_dir):
    """`unlearn run --push-to-hub` of a model with a 12 MB weight file, the LFS upload broken half-way, resumed by
    `unlearn push`, then `lm_eval --model_args pretrained=me/big` downloads it and gives the local folder's numbers."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    from unlearn_methods.scaffolding.tiny_model import tiny_llama_config

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model_dir = tmp_path / "big"
    config = tiny_llama_config(len(tokenizer), intermediate_size=4096, bos_token_id=tokenizer.bos_token_id,
                               eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    LlamaForCausalLM(config).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    assert (model_dir / "model.safetensors").stat().st_size > LFS_THRESHOLD

    hub = hub_standin(fail_lfs_uploads=99)
    env = {**hub.hub_env, "HF_TOKEN": "hf_test_token", "HF_HOME": str(tmp_path / "hf_home")}
    out = tmp_path / "unlearned"
    proc = run_command(["unlearn", "run", "--method", "graddiff", "--model", str(model_dir), "--out", str(out),
                        "--data-dir", str(demo_data_dir), "--forget", "forget01", "--epochs", "1", "--batch-size", "4", "--full",
                        "--quiet", "--push-to-hub", "me/big"], env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"unlearn push {out} --repo me/big" in proc.stderr and "intact" in proc.stderr
    weights = (out / "model.safetensors").read_bytes()
    oid = hashlib.sha256(weights).hexdigest()
    assert len(weights) > LFS_THRESHOLD and hub.lfs == {} and any(o == oid and not done for o, _, done in hub.lfs_puts)

    hub.fail_lfs_uploads = 0
    proc = run_command(["unlearn", "push", str(out), "--repo", "me/big"], env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    repo = hub.repos["me/big"]
    assert len(repo["commits"]) == 1 and repo["lfs"]["model.safetensors"] == oid and hub.lfs[oid] == weights
    assert [o for o, _, done in hub.lfs_puts if done].count(oid) == 1
    local = {p.name for p in out.iterdir() if p.is_file()}
    assert local <= set(repo["files"]), local - set(repo["files"])

    results = {}
    for name, pretrained in (("local", str(out)), ("hub", "me/big")):
        proc = run_command(["lm_eval", "--model", "hf", "--model_args", f"pretrained={pretrained},dtype=float32",
                            "--device", "cpu", "--tasks", "tofu_forget01_likelihood", "--limit", "5",
                            "--output_path", str(tmp_path / name),
                            "--metadata", json.dumps({"data_dir": str(demo_data_dir)})], env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        (path,) = (tmp_path / name).rglob("results_*.json")
        results[name] = json.loads(path.read_text())["results"]
    assert results["hub"] == results["local"] and "forget_prob,none" in results["hub"]["tofu_forget01_likelihood"]
    assert any(m == "GET" and "/me/big/resolve/" in p and p.endswith("model.safetensors") for m, p, _, _ in hub.requests)
