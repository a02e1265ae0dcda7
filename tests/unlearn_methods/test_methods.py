"""Unlearning methods on the tiny model: every method trains with LoRA and full fine-tuning and its loss terms move
the way the method says; GA and NPO forget a memorised forget set while keeping most of the retain set."""

import json
import math

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from unlearn_methods import all_methods, get_method
from unlearn_methods.config import load_run_config
from unlearn_methods.run import train
from unlearn_tasks.prompts import encode_qa
from unlearn_tasks.tofu.demo_corpus import build_corpus

METHODS = all_methods()

#: (logged term, expected direction over training) per method; +1 = rises, -1 = falls.
TRENDS = {
    "ga": [("forget_nll", +1)],
    "graddiff": [("forget_nll", +1)],
    "kl": [("forget_nll", +1)],
    "idk": [("idk_nll", -1)],
    "dpo": [("dpo", -1)],
    "npo": [("npo", -1), ("forget_seq_nll", +1)],
    "simnpo": [("simnpo", -1)],
    "scrub": [("forget_kl", +1)],
    "llmu": [("forget_nll", +1), ("random_nll", -1)],
    "rmu": [("forget_mse", -1)],
    "retain_ft": [("retain_nll", -1)],
    "whp": [("generic_ce", -1)],
    "task_vector": [],  # no training loop: checked on the weights below
}


def test_every_registered_method_has_a_trend_check():
    assert set(METHODS) == set(TRENDS)


def _run(tmp_path, model_dir, data_dir, method, lora, **kw):
    params = {"reinforce_epochs": 2} if method in ("task_vector", "whp") else {}
    cfg = load_run_config(None, method=method, model=str(model_dir), out=str(tmp_path / f"{method}_{lora}"),
                      data_dir=str(data_dir), forget="forget05", lora=lora, epochs=kw.pop("epochs", 4), batch_size=4,
                      lr=kw.pop("lr", 5e-3 if lora else 5e-4), progress=False, method_params=params, **kw)
    return train(cfg).out


def _series(out, term):
    history = json.loads((out / "train_metrics.json").read_text())["log_history"]
    return [h[term] for h in history if term in h]


@pytest.fixture(scope="module")
def memorised_dir(tmp_path_factory, tiny_model_dir):
    from unlearn_methods.finetune import finetune
    from unlearn_tasks.tofu.demo_corpus import training_records

    out = tmp_path_factory.mktemp("memorised")
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    finetune(model, tok, training_records("full"), out, epochs=30, disable_progress=True)
    return out


@pytest.mark.parametrize("lora", [True, False], ids=["lora", "full"])
@pytest.mark.parametrize("method", sorted(TRENDS))
def test_method_trains_and_its_loss_moves_as_defined(method, lora, tmp_path, memorised_dir, demo_data_dir):
    out = _run(tmp_path, memorised_dir, demo_data_dir, method, lora)
    assert (out / "unlearn_config.yaml").is_file()
    assert (out / ("adapter_model.safetensors" if lora and method != "task_vector" else "model.safetensors")).is_file()
    for term, direction in TRENDS[method]:
        values = _series(out, term)
        assert len(values) >= 2, f"{method}: {term} was not logged"
        if method == "scrub":  # 0 at the first max step (student == teacher), then positive
            assert values[-1] > values[0]
        else:
            assert (values[-1] - values[0]) * direction > 0, f"{method}: {term} went {values[0]} -> {values[-1]}"


def _mean_prob(model, tokenizer, records):
    probs = []
    with torch.no_grad():
        for r in records:
            ids, labels = encode_qa(tokenizer, r["question"], r["answer"])
            logits = model(torch.tensor([ids])).logits[0, :-1]
            lp = torch.log_softmax(logits.float(), -1)
            tgt = torch.tensor(labels[1:])
            keep = tgt != -100
            probs.append(math.exp(lp[keep].gather(-1, tgt[keep][:, None]).mean().item()))
    return sum(probs) / len(probs)


def test_task_vector_raises_forget_loss(tmp_path, tiny_model_dir, demo_data_dir):
    out = _run(tmp_path, tiny_model_dir, demo_data_dir, "task_vector", False)
    tok = AutoTokenizer.from_pretrained(out)
    forget = build_corpus()["forget05"]
    before = _mean_prob(AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval(), tok, forget)
    after = _mean_prob(AutoModelForCausalLM.from_pretrained(out).eval(), tok, forget)
    assert after < before


@pytest.mark.parametrize(("method", "lr"), [("ga", 5e-4), ("npo", 5e-4)])
def test_forgetting_on_a_memorised_model(method, lr, tmp_path, memorised_dir, demo_data_dir):
    corpus = build_corpus()
    tok = AutoTokenizer.from_pretrained(memorised_dir)
    base = AutoModelForCausalLM.from_pretrained(memorised_dir).eval()
    f0, r0 = _mean_prob(base, tok, corpus["forget10"]), _mean_prob(base, tok, corpus["retain_perturbed"])
    assert f0 > 0.7 and r0 > 0.7, "the fixture model should have memorised the corpus"
    cfg = load_run_config(None, method=method, model=str(memorised_dir), out=str(tmp_path / method), data_dir=str(demo_data_dir),
                      forget="forget10", lora=False, epochs=3, batch_size=8, lr=lr, progress=False)
    out = train(cfg).out
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    f1, r1 = _mean_prob(model, tok, corpus["forget10"]), _mean_prob(model, tok, corpus["retain_perturbed"])
    assert f0 - f1 > 0.3, (f0, f1)
    assert r0 - r1 < 0.5 * (f0 - f1), (r0, r1, f0, f1)


def test_unknown_method_and_parameter_messages():
    with pytest.raises(ValueError, match="Unknown method 'nope'; available: .*npo"):
        get_method("nope")
    with pytest.raises(ValueError, match="has no parameter.*'bet'.*takes"):
        get_method("npo", {"bet": 1})
