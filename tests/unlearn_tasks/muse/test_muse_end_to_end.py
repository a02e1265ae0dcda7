"""End to end (slow): the bare `lm_eval` command on a MUSE-layout folder; memorise, then `unlearn run --data
muse_news` lowers VerbMem on forget more than KnowMem on retain."""

import json
import sys

import pytest

from fixtures.commands import run_command
from harness_ext.evaluate import run_lm_eval

pytestmark = pytest.mark.slow


def test_lm_eval_command_runs_muse_news_offline(muse_tiny_model_dir, muse_data_dir, tmp_path):
    proc = run_command(["lm_eval", "--model", "hf", "--model_args", f"pretrained={muse_tiny_model_dir},dtype=float32",
                        "--tasks", "muse_news", "--device", "cpu", "--batch_size", "8",
                        "--metadata", json.dumps({"data_dir": str(muse_data_dir)}), "--output_path", str(tmp_path)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    (results_file,) = list(tmp_path.rglob("results_*.json"))
    results = json.loads(results_file.read_text())["results"]["muse_news"]
    for metric in ("forget_verbmem", "forget_knowmem", "retain_knowmem", "mia_loss_auc", "mia_zlib_auc",
                   "mia_min_k_auc", "mia_min_k_plus_plus_auc", "privleak"):
        assert f"{metric},none" in results, metric
    assert "no reference given, so privleak is reported as NaN" in proc.stderr + proc.stdout


def _memorise(model_dir, out, epochs: float = 60):
    """Fine-tune the tiny model on the fixture's raw passages and on its KnowMem prompts with their answers (token
    for token as the task prompts them), so the target knows both."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

    from fixtures.muse import corpus
    from unlearn_methods.finetune import QACollator
    from unlearn_tasks.muse.prompts import knowmem_prompt
    from unlearn_tasks.prompts import encode_text

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    data = corpus()
    rows = [{"input_ids": i, "labels": lab} for r in data["raw"]["forget"] + data["raw"]["retain1"]
            for i, lab in encode_text(tok, r["text"], 256)]
    for s in ("forget", "retain"):
        icl = [(r["question"], r["answer"]) for r in data["knowmem"][f"{s}_qa_icl"]]
        for r in data["knowmem"][f"{s}_qa"]:
            ids = tok.encode(knowmem_prompt(r["question"], icl)) + tok.encode(r["answer"] + "\n\n")
            rows.append({"input_ids": ids, "labels": ids})
    args = TrainingArguments(output_dir=str(out / "checkpoints"), num_train_epochs=epochs, learning_rate=3e-3,
                             per_device_train_batch_size=8, lr_scheduler_type="cosine", warmup_steps=5,
                             save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True, seed=0)
    Trainer(model=model, args=args, train_dataset=Dataset.from_list(rows), data_collator=QACollator(tok.pad_token_id)).train()
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def test_unlearning_lowers_verbmem_on_forget_more_than_knowmem_on_retain(muse_tiny_model_dir, muse_data_dir, tmp_path):
    target = _memorise(muse_tiny_model_dir, tmp_path / "target")
    proc = run_command(["unlearn", "run", "--method", "npo", "--model", str(target), "--data", "muse_news",
                        "--data-dir", str(muse_data_dir), "--forget", "forget", "--full", "--epochs", "10",
                        "--lr", "5e-4", "--batch-size", "4", "--out", str(tmp_path / "npo"), "--quiet"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the fixture's continuations are about 40 tokens: compare over 32 (MUSE's 128 suits its long passages)
    metadata = {"data_dir": str(muse_data_dir), "verbmem_max_tokens": 32}
    scores = {}
    for name in ("target", "npo"):
        res = run_lm_eval(tmp_path / name, ["muse_news_verbmem", "muse_news_knowmem"], tmp_path / f"eval_{name}",
                          metadata, batch_size=8)["results"]
        scores[name] = {"verbmem": res["muse_news_verbmem"]["forget_verbmem,none"],
                        "knowmem_retain": res["muse_news_knowmem"]["retain_knowmem,none"]}
    print(scores, file=sys.stderr)
    assert scores["target"]["verbmem"] > 0.7 and scores["target"]["knowmem_retain"] > 0.7  # memorised
    verbmem_drop = scores["target"]["verbmem"] - scores["npo"]["verbmem"]
    knowmem_drop = scores["target"]["knowmem_retain"] - scores["npo"]["knowmem_retain"]
    assert verbmem_drop > 0.1 and verbmem_drop > knowmem_drop + 0.1, scores
