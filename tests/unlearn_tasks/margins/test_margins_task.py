"""The ``margins_*`` lm-eval tasks on a tiny model: the per-sample record in the results file, equal to margins
computed by hand from a forward pass; options."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from harness_ext.evaluate import run_lm_eval
from unlearn_methods.scaffolding.tofu_corpus import build_corpus
from unlearn_tasks.margins.ensemble import RESULTS_KEY, read_record
from unlearn_tasks.metrics.klom import margins_from_logits
from unlearn_tasks.prompts import answer_continuation, question_prompt


def _direct_margins(model_dir, prompt: str, continuation: str) -> np.ndarray:
    """Teacher-forced margins of the continuation tokens (lm-eval's split of prompt + continuation), no EOS."""
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    context = tok.encode(prompt) if prompt else [tok.bos_token_id]
    whole = tok.encode(prompt + continuation) if prompt else context + tok.encode(continuation)
    with torch.no_grad():
        logits = model(torch.tensor([whole])).logits[0].double().numpy()
    return margins_from_logits(logits[len(context) - 1 : len(whole) - 1], np.array(whole[len(context):]))


@pytest.fixture(scope="module")
def tofu_run(tiny_model_dir, demo_data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("margins_tofu")
    results = run_lm_eval(tiny_model_dir, ["margins_tofu_forget01"], out, {"data_dir": str(demo_data_dir)})
    return out, results


@pytest.mark.slow
def test_tofu_margins_record(tofu_run, tiny_model_dir):
    out, results = tofu_run
    record, task = read_record(out)
    assert task == "margins_tofu_forget01" and record["format"] == "unlearning_margins/1"
    corpus = build_corpus(0)
    sizes = {"forget": len(corpus["forget01"]), "retain": len(corpus["retain_perturbed"]),
             "holdout": len(corpus["holdout01"])}
    assert {k: len(v) for k, v in record["splits"].items()} == sizes
    assert len(record["margins"]) == sum(sizes.values())
    # the first document is the first forget question (the sets are interleaved forget, retain, holdout, ...)
    row = corpus["forget01_perturbed"][0]
    direct = _direct_margins(tiny_model_dir, question_prompt(row["question"]), answer_continuation(row["answer"]))
    assert record["margins"][0] == pytest.approx(direct.mean(), abs=1e-4)
    assert record["n_tokens"][0] == direct.size
    metrics = results["results"]["margins_tofu_forget01"]
    forget = np.array(record["margins"])[record["splits"]["forget"]]
    assert metrics["margin_forget,none"] == pytest.approx(forget.mean())
    assert RESULTS_KEY in results["configs"]["margins_tofu_forget01"]


@pytest.mark.slow
def test_generic_file_task_options(tiny_model_dir, tmp_path):
    data = tmp_path / "data.jsonl"
    rows = [{"prompt": "Question: Who wrote Hamlet?\nAnswer:", "target": " William Shakespeare", "split": "forget"},
            {"text": "The capital of France is Paris.", "split": "retain"},
            {"prompt": "Q: 2+2?", "target": " four", "split": "retain"}]
    data.write_text("\n".join(json.dumps(r) for r in rows))
    mean_run = run_lm_eval(tiny_model_dir, ["margins"], tmp_path / "a", {"data_file": str(data)})
    sum_run = run_lm_eval(tiny_model_dir, ["margins"], tmp_path / "b",
                          {"data_file": str(data), "reduction": "sum", "include_eos": True, "keep_token_margins": True})
    mean_rec = mean_run["configs"]["margins"][RESULTS_KEY]
    sum_rec = sum_run["configs"]["margins"][RESULTS_KEY]
    assert mean_rec["splits"] == {"forget": [0], "retain": [1, 2]}
    for i, r in enumerate(rows):
        direct = _direct_margins(tiny_model_dir, r.get("prompt", ""), r.get("target", r.get("text")))
        assert mean_rec["margins"][i] == pytest.approx(direct.mean(), abs=1e-4)
        assert sum_rec["n_tokens"][i] == direct.size + 1  # EOS included
        assert sum_rec["margins"][i] == pytest.approx(sum(sum_rec["token_margins"][i]), abs=1e-9)
        assert sum_rec["token_margins"][i][:-1] == pytest.approx(direct.tolist(), abs=1e-4)
    assert mean_rec["sample_hash"] == sum_rec["sample_hash"]


def test_generic_task_needs_a_data_file(tiny_model_dir, tmp_path):
    with pytest.raises(Exception, match="data_file"):
        run_lm_eval(tiny_model_dir, ["margins"], tmp_path)
