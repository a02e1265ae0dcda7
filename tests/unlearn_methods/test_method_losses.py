"""The losses of the methods added from open-unlearning's list, computed by hand on a 3-token vocabulary: a stub model
returns fixed logits for each input, so each loss is checked against its paper's formula, number for number."""

import math

import pytest

from fixtures.stub_lm import HALF, LN2, StubModel, batch, ctx
from unlearn_methods import get_method


def test_wga_weights_each_token_by_its_probability_without_differentiating_the_weight():
    model = StubModel({(0, 2): HALF})
    loss, terms = get_method("wga", {"alpha": 0}).loss(ctx(), model, {"forget": batch([0, 2]), "retain": batch([0, 2])})
    assert loss.item() == pytest.approx(-0.5 * LN2)  # -(p^1) * (-log p)
    assert terms["forget_nll"] == pytest.approx(LN2)
    loss.backward()  # d/dz of -w * NLL with w = 1/2 fixed: -1/2 * (softmax - onehot)
    assert model.logits[(0, 2)].grad[0, 0].tolist() == pytest.approx([-0.125, -0.125, 0.25])


def test_satimp_weight_is_p_beta1_times_one_minus_p_beta2():
    model = StubModel({(0, 2): HALF})
    method = get_method("satimp", {"alpha": 0, "beta1": 1, "beta2": 2})
    loss, _ = method.loss(ctx(), model, {"forget": batch([0, 2]), "retain": batch([0, 2])})
    assert loss.item() == pytest.approx(-(0.5 * 0.25) * LN2)


def test_satimp_adds_the_retain_nll_with_weight_alpha():
    model = StubModel({(0, 2): HALF, (0, 1): HALF})  # retain answer token 1: p = 1/4
    loss, terms = get_method("satimp").loss(ctx(), model, {"forget": batch([0, 2]), "retain": batch([0, 1])})
    assert terms["retain_nll"] == pytest.approx(math.log(4))
    assert loss.item() == pytest.approx(-(0.5**5 * 0.5) * LN2 + 0.1 * math.log(4))


def test_undial_distils_toward_the_original_with_the_answer_logit_lowered_by_beta():
    teacher = StubModel({(0, 2): HALF})  # lowering logit 2 by ln 2 makes the target uniform
    student = StubModel({(0, 2): HALF})
    loss, terms = get_method("undial", {"beta": LN2}).loss(ctx(teacher), student, {"forget": batch([0, 2])})
    assert loss.item() == pytest.approx(-(math.log(0.25) * 2 + math.log(0.5)) / 3)  # CE(uniform, [1/4, 1/4, 1/2])
    assert terms["forget_nll"] == pytest.approx(LN2)


def test_ceu_target_is_the_own_distribution_without_the_true_token():
    model = StubModel({(0, 2): HALF})
    loss, _ = get_method("ceu", {"ignore_first_n": 0}).loss(ctx(), model, {"forget": batch([0, 2])})
    assert loss.item() == pytest.approx(math.log(4))  # target [1/2, 1/2, 0] against p = [1/4, 1/4, 1/2]
    loss.backward()  # the target is not differentiated: gradient softmax - target
    assert model.logits[(0, 2)].grad[0, 0].tolist() == pytest.approx([-0.25, -0.25, 0.5])


def test_ceu_leaves_out_the_first_answer_tokens():
    # two answer tokens (2 then 1); position 1 = softmax([0, ln 2, 0]): p(1) = 1/2
    model = StubModel({(0, 2, 1): [[0.0, 0.0, LN2], [0.0, LN2, 0.0], [0.0, 0.0, 0.0]]})
    both, _ = get_method("ceu", {"ignore_first_n": 0}).loss(ctx(), model, {"forget": batch([0, 2, 1])})
    second, _ = get_method("ceu").loss(ctx(), model, {"forget": batch([0, 2, 1])})
    assert both.item() == pytest.approx(math.log(4))
    assert second.item() == pytest.approx(math.log(4))  # the same value, from position 1 alone
    none, _ = get_method("ceu", {"ignore_first_n": 2}).loss(ctx(), model, {"forget": batch([0, 2, 1])})
    assert none.item() == 0.0


def test_pdu_lagrangian_and_dual_ascent():
    # forget logits [0, 0, 3]: (max - mean)^2 = (3 - 1)^2 = 4; position 1 ([1, 1, 1]) only with all_positions
    forget_logits = [[0.0, 0.0, 3.0], [1.0, 1.0, 1.0]]
    model = StubModel({(0, 2): forget_logits, (0, 1): HALF})  # retain NLL = log 4
    inputs = {"forget": batch([0, 2]), "retain": batch([0, 1])}
    method = get_method("pdu", {"alpha": 2.0, "retain_eps": 0.1, "dual_step_size": 1.0, "dual_warmup_epochs": 1})
    loss, terms = method.loss(ctx(epoch=0.5), model, inputs)
    assert terms["forget_margin"] == pytest.approx(4.0)
    assert loss.item() == pytest.approx(4.0 + 2.0 * (math.log(4) - 0.1))
    assert method.dual == 2.0  # still warming up
    method.loss(ctx(epoch=1.0), model, inputs)
    assert method.dual == pytest.approx(2.0 + (math.log(4) - 0.1))
    method.params.retain_eps = 100.0  # constraint slack: lambda goes down, never below 0
    method.loss(ctx(epoch=1.0), model, inputs)
    assert method.dual == 0.0
    everywhere = get_method("pdu", {"all_positions": True})
    assert everywhere.loss(ctx(), model, inputs)[1]["forget_margin"] == pytest.approx((4.0 + 0.0) / 2)
    at_labels = get_method("pdu", {"ou_positions": True})  # open-unlearning: the logits at the answer token, [1, 1, 1]
    assert at_labels.loss(ctx(), model, inputs)[1]["forget_margin"] == pytest.approx(0.0)


def test_altpo_prefers_the_alternate_over_the_forget_answer():
    # model: p(1) = 1/2, p(2) = 1/4; reference: uniform. log-ratios ln(3/2) (alternate 1) and ln(3/4) (forget 2)
    logits = [[0.0, LN2, 0.0], [0.0, 0.0, 0.0]]
    model = StubModel({(0, 1): logits, (0, 2): logits})
    reference = StubModel({(0, 1): [[0.0] * 3] * 2, (0, 2): [[0.0] * 3] * 2})
    inputs = {"forget": batch([0, 2]), "forget_alternate": batch([0, 1]), "retain": batch([0, 1])}
    loss, terms = get_method("altpo", {"beta": 1.0, "alpha": 0}).loss(ctx(reference), model, inputs)
    assert loss.item() == pytest.approx(-2.0 * math.log(2 / 3))  # -2/beta * log sigmoid(beta * ln 2)
    assert terms["alternate_seq_nll"] == pytest.approx(LN2)
    assert terms["forget_seq_nll"] == pytest.approx(math.log(4))
