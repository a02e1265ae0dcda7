"""The SmolLM2 check of RWKU's setting: the real model knows a famous person (the project's own probes about him, in
RWKU's schema: tests/fixtures/rwku_real.py), and a short `unlearn run --data rwku` on a biography corpus about him
moves the forget probes more than the neighbour probes.

Scored by the answer's mean token NLL after the forget tasks' own prompt (the chat template over the release's
question turn, then ``Answer:``), which a 2-step run moves measurably where greedy ROUGE would need far longer.
Measured on the shared 2-core machine at load average 16 (so many times slower than CI's): base scoring 172 s,
unlearning 133 s; forget NLL +0.94, neighbour -0.02."""

import pytest
import torch

from fixtures import rwku_real
from unlearn_tasks.rwku.prompts import answer_prefix, user_turn

pytestmark = [pytest.mark.slow, pytest.mark.optional]
MARGIN = 0.5  # forget must rise this much more than the neighbour probes (measured 0.96)


def _answer_nll(model, tok, query: str, answer: str) -> float:
    doc = {"set": "forget_level2", "type": "", "query": query, "subject": rwku_real.TARGET}
    context = tok.apply_chat_template([{"role": "user", "content": user_turn(doc)}], tokenize=False,
                                      add_generation_prompt=True) + answer_prefix(doc)
    prefix, whole = tok.encode(context), tok.encode(context + " " + answer)
    ids = torch.tensor([whole])
    labels = ids.clone()
    labels[0, :len(prefix)] = -100
    with torch.no_grad():
        return float(model(input_ids=ids, labels=labels).loss)


def _mean_nll(model, tok, probes) -> float:
    return sum(_answer_nll(model, tok, q, a) for q, a, _ in probes) / len(probes)


def test_unlearning_a_famous_person_moves_forget_probes_more_than_neighbours(smollm2_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from unlearn_methods.config import load_run_config
    from unlearn_methods.training import train

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    base = AutoModelForCausalLM.from_pretrained(smollm2_dir).eval()
    for query, answer, wrong in rwku_real.FORGET:  # the model knows him: the true answer beats every wrong one
        true = _answer_nll(base, tok, query, answer)
        assert all(true < _answer_nll(base, tok, query, w) for w in wrong), query
    before = {name: _mean_nll(base, tok, probes) for name, probes in (("forget", rwku_real.FORGET),
                                                                       ("neighbour", rwku_real.NEIGHBOUR))}
    data = rwku_real.write(tmp_path / "rwku")
    cfg = load_run_config(None, method="ga", model=str(smollm2_dir), out=str(tmp_path / "out"), data="rwku",
                          data_dir=str(data), rwku_target=[rwku_real.TARGET], epochs=2, lr=1e-4, batch_size=4,
                          lora=False, save_steps=1000, progress=False)
    unlearned = AutoModelForCausalLM.from_pretrained(train(cfg).out).eval()
    moved = {name: _mean_nll(unlearned, tok, probes) - before[name]
             for name, probes in (("forget", rwku_real.FORGET), ("neighbour", rwku_real.NEIGHBOUR))}
    assert moved["forget"] > moved["neighbour"] + MARGIN, moved
