"""The losses compute the vocabulary projection only from the first position that predicts an answer token
(``losses.answer_logits``): every method's loss and gradient equal those of the whole sequence's logits."""

import copy
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from unlearn_methods import get_method, losses
from unlearn_methods.base import MethodContext
from unlearn_methods.losses import answer_logits, answer_start, forward, sequence_nll, token_nll

#: every method whose loss runs on a text batch (task_vector trains nothing; whp needs its reinforced copy, given)
METHODS = ["ga", "graddiff", "kl", "idk", "dpo", "npo", "simnpo", "scrub", "llmu", "rmu", "retain_ft", "whp", "undial",
           "wga", "satimp", "ceu", "pdu", "altpo"]


def test_answer_start_is_the_first_position_any_row_scores():
    labels = torch.tensor([[-100, -100, -100, 7, 8, -100],
                           [-100, -100, 5, 6, -100, -100],
                           [-100, -100, -100, -100, -100, -100]])
    assert answer_start(labels) == 1  # position 1 predicts row 1's first answer token (at 2)
    assert answer_start(labels[[0, 2]]) == 2
    assert answer_start(labels[[2]]) == 0  # nothing scored: nothing cut


def test_token_nll_is_cross_entropy_at_each_scored_position():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 11)
    labels = torch.tensor([[-100, -100, 3, 4, -100], [-100, 1, 2, 9, 10]])
    nll, mask = token_nll(logits, labels)
    for b in range(2):
        for t in range(4):
            expected = -F.log_softmax(logits[b, t], -1)[labels[b, t + 1]] if labels[b, t + 1] >= 0 else 0.0
            assert float(nll[b, t]) == pytest.approx(float(expected), rel=1e-6, abs=1e-7)
            assert bool(mask[b, t]) == (labels[b, t + 1] >= 0)


@pytest.fixture(scope="module")
def tiny(tiny_model_dir, demo_data_dir):
    """(the tiny Llama, one batch of every part from the demo corpus: prompts of different lengths, right-padded)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from unlearn_methods.forget_retain import ForgetRetainDataset, PairCollator, load_qa

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    forget, retain = load_qa("forget10", data_dir=str(demo_data_dir)), load_qa("retain90", data_dir=str(demo_data_dir))
    alternates = [[f"Someone other than {r['answer'].split(' ')[0]}."] for r in forget]
    dataset = ForgetRetainDataset(forget, retain, tok, ["I have no idea."], seed=0, alternates=alternates)
    batch = PairCollator(tok.pad_token_id)([dataset[i] for i in range(4)])
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    return model, batch


def test_the_cut_logits_are_the_whole_sequences_last_positions(tiny):
    model, batch = tiny
    f = batch["forget"]
    start = answer_start(f["labels"])
    assert start > 0 and (f["attention_mask"] == 0).any()  # the batch exercises the cut and the padding
    with torch.no_grad():
        full = forward(model, f).logits
        cut, labels = answer_logits(model, f)
    assert cut.shape[1] == full.shape[1] - start and torch.equal(labels, f["labels"][:, start:])
    torch.testing.assert_close(cut, full[:, start:], rtol=1e-5, atol=1e-5)
    assert torch.allclose(sequence_nll(cut, labels)[0], sequence_nll(full, f["labels"])[0], rtol=1e-5)


def test_a_model_without_logits_to_keep_gives_the_same_values(tiny):
    model, batch = tiny

    class NoLogitsToKeep(torch.nn.Module):  # a remote-code model's forward signature
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask=None, output_hidden_states=None):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask)

    f = batch["forget"]
    with torch.no_grad():
        plain, labels = answer_logits(NoLogitsToKeep(model), f)
        cut, _ = answer_logits(model, f)
    torch.testing.assert_close(plain, cut, rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="unexpected"):  # other argument errors are not swallowed
        forward(NoLogitsToKeep(model), f, logits_to_keep=1, unknown=True)


def _loss_and_grads(name: str, model, batch, monkeypatch, cut: bool):
    if not cut:  # the whole sequence's logits: what the losses computed before the cut
        monkeypatch.setattr(losses, "answer_start", lambda labels: 0)
    else:
        monkeypatch.setattr(losses, "answer_start", answer_start)
    model = copy.deepcopy(model)
    method = get_method(name, {"max_every": 1} if name == "scrub" else {})
    if name == "whp":
        method.reinforced = copy.deepcopy(model).eval()
    state = SimpleNamespace(global_step=0, max_steps=10, epoch=0.0)
    ctx = MethodContext(trainer=SimpleNamespace(model=model, state=state), reference=copy.deepcopy(model).eval())
    torch.manual_seed(0)
    loss, terms = method.loss(ctx, model, batch)
    loss.backward()
    return float(loss.detach()), terms, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", METHODS)
def test_every_methods_loss_and_gradient_equal_the_whole_sequences(tiny, monkeypatch, name):
    model, batch = tiny
    cut_loss, cut_terms, cut_grads = _loss_and_grads(name, model, batch, monkeypatch, cut=True)
    full_loss, full_terms, full_grads = _loss_and_grads(name, model, batch, monkeypatch, cut=False)
    assert cut_loss == pytest.approx(full_loss, rel=1e-5, abs=1e-6)
    assert cut_terms == pytest.approx(full_terms, rel=1e-5, abs=1e-6)
    assert cut_grads.keys() == full_grads.keys() and cut_grads
    for n, g in full_grads.items():
        assert float((cut_grads[n] - g).norm()) <= 1e-4 * float(g.norm()) + 1e-7, n


def test_a_vision_language_batch_of_image_and_text_rows_gives_the_same_values(tiny_llava_dir, clear_data_dir):
    from unlearn_methods.vlm import clear_records, collate_vqa, encode_vqa, load_vision_model

    processor, model = load_vision_model(str(tiny_llava_dir), torch.float32)
    image, text = (clear_records("forget10", m, str(clear_data_dir))[0] for m in ("image", "text"))
    batch = collate_vqa([encode_vqa(processor, image["question"], image["answer"], image["image"]),
                         encode_vqa(processor, text["question"], text["answer"])], processor.tokenizer.pad_token_id)
    with torch.no_grad():
        full = forward(model, batch).logits
        cut, labels = answer_logits(model, batch)
    start = answer_start(batch["labels"])
    assert start > 0 and cut.shape[1] == full.shape[1] - start
    torch.testing.assert_close(cut, full[:, start:], rtol=1e-5, atol=1e-5)
