"""Method losses on the branches and sequence lengths the first by-value tests left open (found by
benchmarks/mutation.py): the logged term names, retain terms with their weights, 3-token sequences (where ``[:, :-1]``
differs from ``[:, :1]``), padded labels, SCRUB's step schedule. Stub model and notation: tests/fixtures/stub_lm.py."""

import math
from types import SimpleNamespace

import pytest

from fixtures.stub_lm import HALF, LN2, StubModel, batch, ctx
from unlearn_methods import get_method

LN = math.log
ZERO = [0.0, 0.0, 0.0]
RETAIN = (1, 1)
RETAIN_LOGITS = [[0.0, LN(3), 0.0], ZERO]  # p(1) = 3/5


def near(value):
    return pytest.approx(value, rel=1e-5, abs=1e-6)


def test_wga_retain_term_and_beta():
    model = StubModel({(0, 2): HALF, RETAIN: RETAIN_LOGITS})
    inputs = {"forget": batch([0, 2]), "retain": batch(list(RETAIN))}
    loss, terms = get_method("wga", {"beta": 2.0, "gamma": 2.0, "alpha": 3.0}).loss(ctx(), model, inputs)
    assert terms == near({"wga": -0.25 * LN2, "forget_nll": LN2, "retain_nll": LN(5 / 3)})  # weight p^2 = 1/4
    assert loss.item() == near(2 * -0.25 * LN2 + 3 * LN(5 / 3))


def test_satimp_terms_by_name():
    model = StubModel({(0, 2): HALF, RETAIN: RETAIN_LOGITS})
    inputs = {"forget": batch([0, 2]), "retain": batch(list(RETAIN))}
    _, terms = get_method("satimp", {"beta1": 1, "beta2": 1}).loss(ctx(), model, inputs)
    assert terms == near({"satimp": -0.25 * LN2, "forget_nll": LN2, "retain_nll": LN(5 / 3)})


def test_undial_with_a_retain_term_on_three_tokens():
    # forget [0, 2, 1]: answer tokens 2 then 1. Teacher uniform at both positions, lowered by ln 2 on the answer:
    # target softmax([0, 0, -ln 2]) = [2/5, 2/5, 1/5] at position 0, [2/5, 1/5, 2/5] at position 1.
    # student: position 0 [1/4, 1/4, 1/2], position 1 [1/4, 1/2, 1/4]; position 2 (not scored) anything
    student_logits = [[0.0, 0.0, LN2], [0.0, LN2, 0.0], [5.0, 0.0, 0.0]]
    student = StubModel({(0, 2, 1): student_logits, RETAIN: RETAIN_LOGITS})
    teacher = StubModel({(0, 2, 1): [ZERO, ZERO, [0.0, 9.0, 0.0]]})
    inputs = {"forget": batch([0, 2, 1]), "retain": batch(list(RETAIN))}
    loss, terms = get_method("undial", {"beta": LN2, "alpha": 3.0, "gamma": 2.0}).loss(ctx(teacher), student, inputs)
    ce0 = -(0.4 * LN(0.25) + 0.4 * LN(0.25) + 0.2 * LN(0.5))
    ce1 = -(0.4 * LN(0.25) + 0.2 * LN(0.5) + 0.4 * LN(0.25))
    assert terms == near({"undial_ce": (ce0 + ce1) / 2, "forget_nll": LN2, "retain_nll": LN(5 / 3)})
    assert loss.item() == near(2 * (ce0 + ce1) / 2 + 3 * LN(5 / 3))


def test_ceu_terms_by_name():
    model = StubModel({(0, 2): HALF})
    _, terms = get_method("ceu", {"ignore_first_n": 0}).loss(ctx(), model, {"forget": batch([0, 2])})
    assert terms == near({"ceu": LN(4), "forget_nll": LN2})


def test_pdu_margin_is_squared_on_three_tokens():
    # answer positions 0 and 1 ([0, 2, 1]); position 2 (not an answer position) has a large margin
    logits = [[0.0, 0.0, 6.0], [0.0, 3.0, 0.0], [30.0, 0.0, 0.0]]
    model = StubModel({(0, 2, 1): logits, RETAIN: RETAIN_LOGITS})
    inputs = {"forget": batch([0, 2, 1]), "retain": batch(list(RETAIN))}
    method = get_method("pdu", {"alpha": 2.0, "retain_eps": 0.5, "dual_warmup_epochs": 1})
    loss, terms = method.loss(ctx(epoch=0.0), model, inputs)
    # (max - mean)^2: (6 - 2)^2 = 16 and (3 - 1)^2 = 4, mean 10
    assert terms == near({"forget_margin": 10.0, "retain_nll": LN(5 / 3), "dual": 2.0})
    assert loss.item() == near(10.0 + 2.0 * (LN(5 / 3) - 0.5))
    assert method.dual == 2.0  # epoch 0 < 1 warm-up epoch
    everywhere = get_method("pdu", {"all_positions": True})
    assert everywhere.loss(ctx(), model, inputs)[1]["forget_margin"] == near((16 + 4 + 400) / 3)
    at_labels = get_method("pdu", {"ou_positions": True})  # open-unlearning: positions 1 and 2 (labels 2, 1)
    assert at_labels.loss(ctx(), model, inputs)[1]["forget_margin"] == near((4 + 400) / 2)
    method.loss(SimpleNamespace(**{**vars(ctx()), "trainer": SimpleNamespace(state=SimpleNamespace(epoch=None))}),
                model, inputs)
    assert method.dual == 2.0  # no epoch known yet: 0, still warming up


def test_whp_on_three_tokens_with_padding():
    # forget [0, 2, 1] with the second label padded: only position 0 is distilled
    logits = [[0.0, 0.0, LN2], [LN(9), 0.0, 0.0], ZERO]
    method = get_method("whp", {"alpha": 0.5})
    method.reinforced = StubModel({(0, 2, 1): [[LN(4), 0.0, -1.0], [0.0, 5.0, 0.0], ZERO]})
    f = batch([0, 2, 1])
    f["labels"][0, 2] = -100
    loss, terms = method.loss(ctx(StubModel({(0, 2, 1): [ZERO, ZERO, ZERO]})), StubModel({(0, 2, 1): logits}),
                              {"forget": f})
    assert terms == near({"generic_ce": 8 / 5 * LN2}) and loss.item() == near(8 / 5 * LN2)


@pytest.mark.parametrize(("step", "max_steps", "is_max"), [
    (0, 10, True), (1, 10, False), (4, 10, True), (5, 10, False), (6, 10, False), (0, 0, True), (2, None, False)])
def test_scrub_schedule(step, max_steps, is_max):
    method = get_method("scrub", {"max_every": 2, "max_fraction": 0.5})
    state = SimpleNamespace(max_steps=max_steps)
    assert method.is_max_step(SimpleNamespace(step=step, trainer=SimpleNamespace(state=state))) is is_max


def test_dpo_simnpo_kl_terms_by_name():
    ref = StubModel({(0, 2): [ZERO, ZERO], (2, 0): [[LN2, 0.0, 0.0], ZERO], RETAIN: [ZERO, ZERO]})
    model = StubModel({(0, 2): HALF, (2, 0): [ZERO, ZERO], RETAIN: RETAIN_LOGITS})
    inputs = {"forget": batch([0, 2]), "forget_idk": batch([2, 0]), "retain": batch(list(RETAIN))}
    assert set(get_method("dpo").loss(ctx(ref), model, inputs)[1]) == {"dpo", "retain_nll"}
    assert get_method("dpo").loss(ctx(ref), model, inputs)[1]["retain_nll"] == near(LN(5 / 3))
    assert get_method("simnpo").loss(ctx(), model, inputs)[1]["retain_nll"] == near(LN(5 / 3))
    assert get_method("kl").loss(ctx(ref), model, inputs)[1]["forget_nll"] == near(LN2)


def test_altpo_with_retain_weight_and_beta():
    # model p(1) = 1/2, p(2) = 1/4; reference uniform: win - lose = ln(3/2) - ln(3/4) = ln 2
    # beta 2: -2/2 * log sigmoid(2 ln 2) = -log(4/5) = ln 5/4
    logits = [[0.0, LN2, 0.0], ZERO]
    model = StubModel({(0, 1): logits, (0, 2): logits})
    reference = StubModel({(0, 1): [ZERO, ZERO], (0, 2): [ZERO, ZERO]})
    inputs = {"forget": batch([0, 2]), "forget_alternate": batch([0, 1]), "retain": batch([0, 1])}
    loss, terms = get_method("altpo", {"beta": 2.0, "gamma": 2.0, "alpha": 3.0}).loss(ctx(reference), model, inputs)
    assert terms == near({"altpo": LN(5 / 4), "alternate_seq_nll": LN2, "forget_seq_nll": LN(4), "retain_nll": LN2})
    assert loss.item() == near(2 * LN(5 / 4) + 3 * LN2)
