"""The empty-generation guard: a model that stops at once is flagged in the log and in the results file."""

import json
import logging
import shutil

import pytest
from transformers import GenerationConfig

from harness_ext.evaluate import run_lm_eval
from unlearn_tasks.generation_check import empty_generation_warning


def test_warning_only_when_most_generations_are_empty():
    assert empty_generation_warning("t", [True, False, False]) is None
    assert empty_generation_warning("t", [True, True, False, False]) is None  # half is not most
    assert empty_generation_warning("t", []) is None
    message = empty_generation_warning("t", [True, True, False], hint="Try X.")
    assert message.startswith("t: 2 of 3 greedy generations are empty")
    assert "--apply_chat_template" in message and message.endswith("Try X.")
    chat = empty_generation_warning("t", [True, True], chat_template_applied=True)
    assert "chat template was applied" in chat


@pytest.fixture()
def eos_model_dir(tiny_model_dir, tmp_path):
    """The tiny model with every token but EOS suppressed: it answers with EOS at once, like an instruct model
    asked 'Question: ...\\nAnswer:' without its chat template."""
    out = tmp_path / "eos_model"
    shutil.copytree(tiny_model_dir, out)
    config = json.loads((out / "config.json").read_text())
    eos, vocab = config["eos_token_id"], config["vocab_size"]
    GenerationConfig(eos_token_id=eos, pad_token_id=config["pad_token_id"],
                     suppress_tokens=[i for i in range(vocab) if i != eos]).save_pretrained(out)
    return out


@pytest.mark.slow
def test_empty_generations_are_flagged_in_log_and_results(eos_model_dir, demo_data_dir, tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        res = run_lm_eval(eos_model_dir, ["tofu_forget01_rouge"], tmp_path / "out", {"data_dir": str(demo_data_dir)},
                          batch_size=8, limit=8)
    assert res["results"]["tofu_forget01_rouge"]["forget_rougeL_recall,none"] == 0.0
    (results_file,) = list((tmp_path / "out").rglob("results_*.json"))
    warnings = json.loads(results_file.read_text())["configs"]["tofu_forget01_rouge"]["unlearning_warnings"]
    assert len(warnings) == 1 and "8 of 8 greedy generations are empty" in warnings[0]
    assert "--apply_chat_template" in warnings[0] and '"generation_prompt": "tofu"' in warnings[0]
    assert any("greedy generations are empty" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
def test_no_warning_when_the_model_answers(tiny_model_dir, demo_data_dir, tmp_path):
    run_lm_eval(tiny_model_dir, ["tofu_forget01_rouge"], tmp_path, {"data_dir": str(demo_data_dir)},
                batch_size=8, limit=4, gen_kwargs="max_gen_toks=8")
    (results_file,) = list(tmp_path.rglob("results_*.json"))
    assert "unlearning_warnings" not in json.loads(results_file.read_text())["configs"]["tofu_forget01_rouge"]
