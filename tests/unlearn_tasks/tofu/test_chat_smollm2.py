"""open-unlearning's chat setting on the real SmolLM2-135M-Instruct (``smollm2_dir``): the tokens our TOFU
requests score under ``--apply_chat_template --system_instruction`` with ``answer_scoring: tofu`` equal those built
by hand from open-unlearning's ``preprocess_chat_instance`` rules on SmolLM2's ChatML template, whose turn ends in
``<|im_end|>\\n`` (so open-unlearning appends an EOS after the newline); and the generation prompt."""

from pathlib import Path

import pytest
from lm_eval.models.huggingface import HFLM
from lm_eval.tasks import TaskManager

from fixtures import real_model as real_model_data
from harness_ext import tasks_dir
from harness_ext.answer_logprobs import encode_request
from harness_ext.request_types import ANSWER_LOGPROBS, install_request_types

pytestmark = [pytest.mark.optional]
SYSTEM = "You are a helpful assistant."


def chatml_prompt(question: str) -> str:
    """SmolLM2's generation prompt, by hand."""
    return (f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n{question}<|im_end|>\n"
            "<|im_start|>assistant\n")


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return real_model_data.write(tmp_path_factory.mktemp("real_model_data"))


@pytest.fixture(scope="module")
def smollm2_lm(smollm2_dir):
    install_request_types()
    return HFLM(pretrained=str(smollm2_dir), dtype="float32", device="cpu", batch_size=8,
                chat_template_args={"date_string": "10 Apr 2025"})  # SmolLM2's template has no date: unused


def _instances(lm, data_dir):
    tm = TaskManager(include_path=str(tasks_dir()), include_defaults=False,
                     metadata={"data_dir": str(data_dir), "answer_scoring": "tofu"})
    task = tm.load(["tofu_forget01"])["tasks"]["tofu_forget01"]
    task.build_all_requests(rank=0, world_size=1, apply_chat_template=True, system_instruction=SYSTEM,
                            chat_template=lm.apply_chat_template)
    return task.instances


def test_scored_ids_are_ou_chat_tokens(smollm2_lm, data_dir):
    tok = smollm2_lm.tokenizer
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    newline = tok("\n", add_special_tokens=False)["input_ids"]
    assert im_end == tok.eos_token_id and len(newline) == 1
    n = 0
    for inst in _instances(smollm2_lm, data_dir):
        if inst.request_type != ANSWER_LOGPROBS:
            continue
        ctx, scored = encode_request(smollm2_lm, inst)
        assert ctx == tok(chatml_prompt(inst.doc["question"]), add_special_tokens=False)["input_ids"]
        # the answer, the template's '<|im_end|>\n', then open-unlearning's EOS after the newline
        assert scored == tok(inst.args[1], add_special_tokens=False)["input_ids"] + [im_end, *newline, im_end]
        n += 1
    assert n == 4 * 5 + 4 * 5 + 4 * 4 + 12 * 4 + 4  # forget, retain (answer, paraphrase, 3 perturbed), ra, wf, holdout


def test_generation_prompt_is_ou_prompt(smollm2_lm, data_dir):
    gens = [i for i in _instances(smollm2_lm, data_dir) if i.request_type == "generate_until"]
    assert len(gens) == 24
    for inst in gens:
        assert inst.args[0] == chatml_prompt(inst.doc["question"])
        ids = smollm2_lm.tok_batch_encode([inst.args[0]])[0][0].tolist()
        assert ids == smollm2_lm.tokenizer(inst.args[0], add_special_tokens=False)["input_ids"]


#: open-unlearning's evaluator (d3d7cf9) on SmolLM2 with its Llama-3.2-1B-Instruct template settings, this data,
#: SmolLM2 as its own reference (benchmarks/bench_tofu_eval.py --chat, 2026-11-26; its TOFU_EVAL.json agg_values).
OU_CHAT_VALUES = {
    "forget_prob": 0.101598, "forget_truth_ratio": 0.690059, "retain_prob": 0.105785, "retain_truth_ratio": 0.176619,
    "ra_prob": 0.174073, "ra_truth_ratio": 0.178145, "wf_prob": 0.345676, "wf_truth_ratio": 0.430454,
    "mia_loss_auc": 0.625, "mia_zlib_auc": 0.75, "mia_min_k_auc": 0.625, "mia_min_k_plus_plus_auc": 0.625,
    "extraction_strength": 0.18213, "exact_memorization": 0.607101,
}


@pytest.mark.slow
def test_chat_setting_equals_recorded_open_unlearning_values(smollm2_dir, data_dir, tmp_path):
    from harness_ext.evaluate import run_lm_eval

    res = run_lm_eval(smollm2_dir, ["tofu_forget01_likelihood"], tmp_path, {"data_dir": str(data_dir),
                      "answer_scoring": "tofu"}, batch_size=8, apply_chat_template=True, system_instruction=SYSTEM,
                      extra_model_args={"chat_template_args": {"date_string": "10 Apr 2025"}})
    values = {k.split(",")[0]: v for k, v in res["results"]["tofu_forget01_likelihood"].items() if "," in k}
    for name, expected in OU_CHAT_VALUES.items():
        assert values[name] == pytest.approx(expected, abs=3e-5), name
