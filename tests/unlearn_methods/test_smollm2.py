"""A real pretrained model (SmolLM2-135M-Instruct, built from PyPI by the ``smollm2_dir`` fixture) on the
project's own TOFU-schema data (tests/fixtures/real_model.py): what tiny random models cannot show.

Slow on a CPU: measured on the shared 2-core machine, the LoRA test took 6.5 minutes at load average 6 (its pieces
on a lightly loaded machine: memorisation 33 s, one evaluation 8 to 14 s, unlearning 5 s); the model build takes
about 30 s once, then it is cached."""

from pathlib import Path

import pytest

from fixtures import real_model as real_model_data
from harness_ext.evaluate import run_lm_eval

pytestmark = [pytest.mark.slow, pytest.mark.optional]  # optional: about 8 min on 2 CPU cores, plus the first build
CHANCE = 0.25  # the answer against three wrong options


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return real_model_data.write(tmp_path_factory.mktemp("real_model_data"))


def _likelihood(model_dir, out, data_dir, **kwargs) -> dict[str, float]:
    res = run_lm_eval(model_dir, ["tofu_forget01_likelihood"], out, {"data_dir": str(data_dir)}, batch_size=8, **kwargs)
    return {k.split(",")[0]: v for k, v in res["results"]["tofu_forget01_likelihood"].items() if "," in k}


def test_pretrained_model_knows_world_facts(smollm2_dir, data_dir, tmp_path):
    values = _likelihood(smollm2_dir, tmp_path, data_dir)
    assert values["wf_prob"] > CHANCE + 0.1  # measured 0.519
    assert values["wf_truth_ratio"] > 0.3
    assert values["forget_prob"] < 0.2  # invented facts: never seen


def test_tofu_prompt_gives_generations_where_the_plain_prompt_stops(smollm2_dir, data_dir, tmp_path):
    """The instruct model answers 'Question: ...\\nAnswer:' about the invented authors with EOS at once; after
    TOFU's 'Answer: ' it writes an answer (issue 16's ROUGE gap, on a real model)."""
    rouge = {}
    for mode in ("all", "tofu"):
        res = run_lm_eval(smollm2_dir, ["tofu_forget01_rouge"], tmp_path / mode,
                          {"data_dir": str(data_dir), "answer_scoring": mode}, batch_size=8,
                          gen_kwargs="max_gen_toks=16")
        rouge[mode] = res["results"]["tofu_forget01_rouge"]
    assert rouge["all"]["forget_rougeL_recall,none"] + rouge["all"]["retain_rougeL_recall,none"] < 0.05
    assert rouge["tofu"]["retain_rougeL_recall,none"] > 0.2


def test_lora_unlearning_moves_forget_more_than_world_facts(smollm2_dir, data_dir, tmp_path):
    """Memorise the invented facts (full fine-tuning, 10 steps), unlearn the forget author with Gradient
    Difference on a LoRA adapter (3 steps), and compare what moved."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from unlearn_methods.config import RunConfig
    from unlearn_methods.finetune import finetune
    from unlearn_methods.training import train

    target = tmp_path / "target"
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    model = AutoModelForCausalLM.from_pretrained(smollm2_dir)
    records = [{"question": r["question"], "answer": a}
               for r in real_model_data.FORGET + real_model_data.RETAIN for a in (r["answer"], r["paraphrased_answer"])]
    finetune(model, tok, records, target, epochs=5, lr=1e-4, batch_size=8, disable_progress=True)
    before = _likelihood(target, tmp_path / "eval_target", data_dir)
    assert before["forget_prob"] > 0.4  # memorised (measured 0.60, from 0.09 before fine-tuning)

    cfg = RunConfig(method="graddiff", model=str(target), out=str(tmp_path / "unlearned"), data="tofu",
                    data_dir=str(data_dir), forget="forget01", retain="retain99", lora=True, epochs=3, lr=1e-3,
                    batch_size=4, progress=False, prompt_format="plain")  # fine-tuned and evaluated plain
    adapter = train(cfg).out
    after = _likelihood(target, tmp_path / "eval_unlearned", data_dir, extra_model_args={"peft": str(adapter)})

    forget_drop = before["forget_prob"] - after["forget_prob"]
    wf_drop = before["wf_prob"] - after["wf_prob"]
    assert forget_drop > 0.2  # measured 0.60 -> 0.16
    assert forget_drop > 5 * abs(wf_drop)  # measured 0.548 -> 0.534
    assert after["wf_prob"] > CHANCE + 0.1
    assert after["retain_prob"] > after["forget_prob"] + 0.2
