"""The losses of the thirteen core methods checked by value on a stub model (3-token vocabulary, fixed logits per
input), each expected value computed by hand from the method's formula. Weights are set to distinct values
(gamma 2, alpha 3, ...) so that a dropped or swapped weight, a flipped sign or a missing reference model changes the
number. The six methods of test_method_losses.py (wga, satimp, undial, ceu, pdu, altpo) are checked there.

Inputs and what the stub model gives (position 0 predicts the one answer token):
  forget     [0, 2]: softmax([0, 0, ln 2])   -> p(2) = 1/2,  NLL ln 2
  retain     [1, 1]: softmax([0, ln 3, 0])   -> p(1) = 3/5,  NLL ln 5/3
  forget_idk [2, 0]: softmax([0, 0, 0])      -> p(0) = 1/3,  NLL ln 3
  random     [1, 0]: softmax([ln 6, 0, 0])   -> p(0) = 3/4,  NLL ln 4/3
The reference model is uniform everywhere except on forget_idk, where softmax([ln 2, 0, 0]) gives p(0) = 1/2.
"""

import math
from types import SimpleNamespace

import pytest
import torch

from fixtures.stub_lm import HALF, LN2, StubModel, batch, ctx
from unlearn_methods import get_method

LN = math.log
ZERO = [0.0, 0.0, 0.0]
FORGET, RETAIN, IDK, RANDOM = (0, 2), (1, 1), (2, 0), (1, 0)
MODEL = {FORGET: HALF, RETAIN: [[0.0, LN(3), 0.0], ZERO], IDK: [ZERO, ZERO], RANDOM: [[LN(6), 0.0, 0.0], ZERO]}
REFERENCE = {FORGET: [ZERO, ZERO], RETAIN: [ZERO, ZERO], IDK: [[LN2, 0.0, 0.0], ZERO], RANDOM: [ZERO, ZERO]}
#: KL(uniform || model) at the retain answer position: model [1/5, 3/5, 1/5]
KL_RETAIN = (LN(5 / 3) + LN(5 / 9) + LN(5 / 3)) / 3
#: KL(uniform || model) at the forget answer position: model [1/4, 1/4, 1/2]
KL_FORGET = (LN(4 / 3) + LN(4 / 3) + LN(2 / 3)) / 3


def near(value):
    """Equal up to float32 rounding (the stub computes in float32)."""
    return pytest.approx(value, rel=1e-5, abs=1e-6)


def _inputs():
    return {"forget": batch(list(FORGET)), "retain": batch(list(RETAIN)), "forget_idk": batch(list(IDK)),
            "forget_random": batch(list(RANDOM))}


def _loss(name, params, context=None):
    return get_method(name, params).loss(context or ctx(StubModel(REFERENCE)), StubModel(MODEL), _inputs())


def test_ga_is_minus_the_forget_nll():
    loss, terms = _loss("ga", {})
    assert loss.item() == near(-LN2) and terms["forget_nll"] == near(LN2)


def test_graddiff_weights_gamma_on_forget_and_alpha_on_retain():
    loss, terms = _loss("graddiff", {"gamma": 2.0, "alpha": 3.0})
    assert loss.item() == near(-2 * LN2 + 3 * LN(5 / 3))
    assert terms == near({"forget_nll": LN2, "retain_nll": LN(5 / 3)})


def test_kl_is_ascent_plus_kl_to_the_reference_on_retain():
    loss, terms = _loss("kl", {"gamma": 2.0, "alpha": 3.0})
    assert KL_RETAIN == near(LN(125 / 81) / 3)
    assert loss.item() == near(-2 * LN2 + 3 * KL_RETAIN)
    assert terms["retain_kl"] == near(KL_RETAIN)


def test_idk_is_descent_on_refusals_and_retain():
    loss, terms = _loss("idk", {"gamma": 2.0, "alpha": 3.0})
    assert loss.item() == near(2 * LN(3) + 3 * LN(5 / 3))
    assert terms == near({"idk_nll": LN(3), "retain_nll": LN(5 / 3)})


def test_retain_ft_is_the_retain_nll():
    loss, terms = _loss("retain_ft", {})
    assert loss.item() == near(LN(5 / 3)) and terms == near({"retain_nll": LN(5 / 3)})


def test_idk_dpo_prefers_the_refusal_with_log_ratios_to_the_reference():
    # win (refusal):  log pi - log pi_ref = ln(1/3) - ln(1/2) = ln 2/3
    # lose (forget):  ln(1/2) - ln(1/3) = ln 3/2;  win - lose = ln 4/9
    # beta 2: -2/2 * log sigmoid(2 ln 4/9) = -log((16/81) / (1 + 16/81)) = ln 97/16
    loss, terms = _loss("dpo", {"beta": 2.0, "gamma": 2.0, "alpha": 3.0})
    assert terms["dpo"] == near(LN(97 / 16))
    assert loss.item() == near(2 * LN(97 / 16) + 3 * LN(5 / 3))


def test_npo_uses_the_reference_log_ratio():
    # log pi/pi_ref on forget = ln(1/2) - ln(1/3) = ln 3/2; beta 2: -2/2 * log sigmoid(-2 ln 3/2)
    # = -log((4/9) / (1 + 4/9)) = ln 13/4. Without the reference it would be -log sigmoid(-2 ln 2) = ln 5.
    loss, terms = _loss("npo", {"beta": 2.0, "gamma": 2.0, "alpha": 3.0})
    assert terms["npo"] == near(LN(13 / 4))
    assert terms["forget_seq_nll"] == near(LN2) and terms["retain_nll"] == near(LN(5 / 3))
    assert loss.item() == near(2 * LN(13 / 4) + 3 * LN(5 / 3))


def test_npo_reference_matters():
    same = ctx(StubModel(MODEL))  # reference = the model itself: log-ratio 0, NPO = 2/beta * ln 2
    _, terms = _loss("npo", {"beta": 2.0}, same)
    assert terms["npo"] == near(LN2)


def test_simnpo_is_length_normalised_with_margin_delta():
    # forget [0, 2, 1]: answer tokens 2 (p 1/2) and 1 (p 1/2): summed NLL 2 ln 2 over 2 tokens -> mean ln 2
    model = StubModel({(0, 2, 1): [[0.0, 0.0, LN2], [0.0, LN2, 0.0], ZERO], RETAIN: MODEL[RETAIN]})
    inputs = {"forget": batch([0, 2, 1]), "retain": batch(list(RETAIN))}
    loss, terms = get_method("simnpo", {"beta": 2.0, "delta": 0.5, "gamma": 2.0, "alpha": 3.0}).loss(ctx(), model, inputs)
    # -2/2 * log sigmoid(2 (ln 2 - 0.5)) = log(1 + exp(-(2 ln 2 - 1))) = log(1 + e/4)
    assert terms["simnpo"] == near(LN(1 + math.e / 4))
    assert loss.item() == near(2 * LN(1 + math.e / 4) + 3 * LN(5 / 3))


def test_scrub_max_steps_push_away_min_steps_stay_close():
    ref = StubModel(REFERENCE)
    method = get_method("scrub", {"gamma": 2.0, "alpha": 3.0, "max_every": 2, "max_fraction": 0.5})
    # step 0 of 10: a max step (even, within the first half): -gamma * KL(reference || model) on forget
    loss, terms = method.loss(ctx(ref, step=0, max_steps=10), StubModel(MODEL), _inputs())
    assert KL_FORGET == near(LN(32 / 27) / 3)
    assert loss.item() == near(-2 * KL_FORGET) and terms == near({"forget_kl": KL_FORGET})
    # step 1 (odd) and step 6 (past the first half): min steps, KL + alpha * NLL on retain
    for step in (1, 6):
        loss, terms = method.loss(ctx(ref, step=step, max_steps=10), StubModel(MODEL), _inputs())
        assert loss.item() == near(KL_RETAIN + 3 * LN(5 / 3)), step
        assert terms == near({"retain_kl": KL_RETAIN, "retain_nll": LN(5 / 3)})


def test_llmu_three_terms_with_their_own_weights():
    loss, terms = _loss("llmu", {"eps_forget": 2.0, "eps_random": 3.0, "eps_retain": 5.0})
    assert terms == near({"forget_nll": LN2, "random_nll": LN(4 / 3), "retain_kl": KL_RETAIN})
    assert loss.item() == near(-2 * LN2 + 3 * LN(4 / 3) + 5 * KL_RETAIN)


def test_rmu_steers_forget_activations_and_keeps_retain_ones():
    # hidden size 2, three layers (+ embeddings); layer 1 -> hidden_states[2]
    emb, other = [[0.0, 0.0], [0.0, 0.0]], [[9.0, 9.0], [9.0, 9.0]]
    model = StubModel({}, hidden={FORGET: [emb, other, [[1.0, 2.0], [3.0, 4.0]], other],
                                  RETAIN: [emb, other, [[0.0, 1.0], [1.0, 1.0]], other]})
    reference = StubModel({}, hidden={RETAIN: [emb, other, [[0.0, 0.0], [1.0, 3.0]], other]})
    inputs = {"forget": batch(list(FORGET), attention=[1, 0]), "retain": batch(list(RETAIN))}
    method = get_method("rmu", {"layer": 1, "steering_coeff": 2.0, "alpha": 3.0})
    method.direction = torch.tensor([1.0, 0.0])  # target 2 * [1, 0]
    loss, terms = method.loss(ctx(reference), model, inputs)
    # forget: only token 0 (padding masked): ((1-2)^2 + (2-0)^2) / (1 token * 2 dims) = 2.5
    # retain: ((0-0)^2 + (1-0)^2 + (1-1)^2 + (1-3)^2) / (2 tokens * 2 dims) = 1.25
    assert terms == near({"forget_mse": 2.5, "retain_mse": 1.25})
    assert loss.item() == near(2.5 + 3 * 1.25)
    # open-unlearning's averaging: the answer position (1) of each sequence, padding or not (one sequence each)
    ou = get_method("rmu", {"layer": 1, "steering_coeff": 2.0, "alpha": 3.0, "positions": "open_unlearning"})
    ou.direction = torch.tensor([1.0, 0.0])
    # forget: ((3-2)^2 + (4-0)^2) / 2 = 8.5; retain: ((1-1)^2 + (1-3)^2) / 2 = 2
    assert ou.loss(ctx(reference), model, inputs)[1] == near({"forget_mse": 8.5, "retain_mse": 2.0})


def test_rmu_direction_is_a_seeded_unit_vector_drawn_once():
    hidden = {FORGET: [[[0.0] * 4] * 2] * 3, RETAIN: [[[0.0] * 4] * 2] * 3}
    model = StubModel({}, hidden=hidden)
    method = get_method("rmu", {"seed": 3, "steering_coeff": 2.0})
    _, terms = method.loss(ctx(model), model, {"forget": batch(list(FORGET)), "retain": batch(list(RETAIN))})
    assert float(method.direction.norm()) == near(1.0) and method.direction.shape == (4,)
    assert terms["forget_mse"] == near(4.0 / 4)  # |0 - 2u|^2 = 4 per token, over 4 dims
    again = get_method("rmu", {"seed": 3})
    again.loss(ctx(model), model, {"forget": batch(list(FORGET)), "retain": batch(list(RETAIN))})
    assert torch.equal(again.direction, method.direction)


def test_whp_distils_the_generic_prediction():
    # base (reference) logits 0; reinforced [ln 4, 0, -1]: relu(reinforced - base) = [ln 4, 0, 0] (the -1 is cut)
    # alpha 0.5: generic = softmax([-ln 2, 0, 0]) = [1/5, 2/5, 2/5]; model [1/4, 1/4, 1/2]
    # CE = -(1/5 ln 1/4 + 2/5 ln 1/4 + 2/5 ln 1/2) = 8/5 ln 2
    method = get_method("whp", {"alpha": 0.5, "retain_weight": 3.0})
    method.reinforced = StubModel({FORGET: [[LN(4), 0.0, -1.0], ZERO]})
    loss, terms = method.loss(ctx(StubModel(REFERENCE)), StubModel(MODEL), _inputs())
    assert terms == near({"generic_ce": 8 / 5 * LN2, "retain_nll": LN(5 / 3)})
    assert loss.item() == near(8 / 5 * LN2 + 3 * LN(5 / 3))
    method = get_method("whp", {"alpha": 1.0})  # generic softmax([-ln 4, 0, 0]) = [1/9, 4/9, 4/9]; no retain term
    method.reinforced = StubModel({FORGET: [[LN(4), 0.0, -1.0], ZERO]})
    loss, terms = method.loss(ctx(StubModel(REFERENCE)), StubModel(MODEL), _inputs())
    assert loss.item() == near(-(1 / 9 * LN(1 / 4) + 4 / 9 * LN(1 / 4) + 4 / 9 * LN(1 / 2)))
    assert "retain_nll" not in terms


def test_task_vector_subtracts_alpha_times_the_weight_change():
    base = torch.nn.Linear(2, 1, bias=False)
    base.register_buffer("count", torch.tensor([7]))  # integer buffers are left alone
    reinforced = torch.nn.Linear(2, 1, bias=False)
    reinforced.register_buffer("count", torch.tensor([100]))
    with torch.no_grad():
        base.weight.copy_(torch.tensor([[1.0, 2.0]]))
        reinforced.weight.copy_(torch.tensor([[2.0, 5.0]]))
    method = get_method("task_vector", {"alpha": 0.5})
    method.reinforced = reinforced
    run = SimpleNamespace(base_model_for_arithmetic=lambda: base)
    out = method.finalize(run, None)
    # w - 0.5 * (w_reinforced - w) = [1 - 0.5, 2 - 1.5]
    assert out is base and out.weight[0].tolist() == near([0.5, 0.5]) and int(out.count) == 7
    assert method.reinforced is None and method.trains is False
