"""The patching engine of ``unlearn depth`` on tiny Llamas built from a config: its endpoints are exact."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

from transformers import LlamaForCausalLM  # noqa: E402

from unlearn_methods.depth_items import DepthItem  # noqa: E402
from unlearn_methods.patching import depth_scores, span_scores  # noqa: E402
from unlearn_methods.scaffolding.tiny_model import tiny_llama_config  # noqa: E402
from unlearn_tasks.metrics.depth import example_depth  # noqa: E402

N_LAYERS = 3


def _model(seed: int) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    model = LlamaForCausalLM(tiny_llama_config(64, num_hidden_layers=N_LAYERS)).eval()
    with torch.no_grad():
        model.model.norm.weight.uniform_(0.5, 1.5)  # a final norm that is not the identity's (trained models' are not)
    return model


def _perturbed(model: LlamaForCausalLM, seed: int) -> LlamaForCausalLM:
    """``model`` with every decoder layer's weights moved (embeddings, final norm and head shared): a retain
    stand-in whose logits differ only through its hidden states."""
    other = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in other.model.layers.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen))
    return other


ITEMS = [DepthItem(0, "q0", (0, 5, 9, 14, 22, 31, 40, 7), 3, 7, "a"),
         DepthItem(1, "q1", (0, 11, 12, 13, 44, 45), 2, 5, "b"),
         DepthItem(2, "q2", (0, 3, 60, 61, 62, 63, 8, 9, 10), 4, 8, "c")]


def _scores(model, items=ITEMS):
    width = max(len(i.input_ids) for i in items)
    ids = torch.tensor([list(i.input_ids) + [2] * (width - len(i.input_ids)) for i in items])
    mask = torch.tensor([[1] * len(i.input_ids) + [0] * (width - len(i.input_ids)) for i in items])
    with torch.no_grad():
        return span_scores(model(input_ids=ids, attention_mask=mask).logits, items)


def test_span_score_is_the_mean_log_probability_of_the_span_tokens():
    model = _model(0)
    item = ITEMS[0]
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([item.input_ids])).logits[0], -1)
    by_hand = sum(logp[p, item.input_ids[p + 1]].item() for p in range(item.start, item.end)) / (item.end - item.start)
    assert _scores(model, [item])[0] == pytest.approx(by_hand, abs=1e-6)
    assert item.labels == (22, 31, 40, 7)


@pytest.mark.parametrize("states", ["hidden_states", "layer_output"])
def test_unlearned_equal_to_retain_gives_stage_one_exactly_and_uds_one(states):
    target, retain = _model(0), _perturbed(_model(0), 1)
    full, s1, s2 = depth_scores(target, retain, retain, ITEMS, pad_id=2, batch_size=2, states=states)
    assert s1 == s2
    assert full == pytest.approx(_scores(target), abs=1e-6)  # batching and padding change nothing
    for f, a, b in zip(full, s1, s2):
        depth = example_depth(f, a, b, tau=0.0)
        assert depth.uds in (1.0, None)


def test_unlearned_equal_to_target_changes_nothing_with_layer_outputs():
    target, retain = _model(0), _perturbed(_model(0), 1)
    full, _, s2 = depth_scores(target, retain, target, ITEMS, pad_id=2, states="layer_output")
    for f, row in zip(full, s2):
        assert row == pytest.approx([f] * N_LAYERS, abs=1e-5)
        assert example_depth(f, [f - 1.0] * N_LAYERS, row).uds == pytest.approx(0.0, abs=1e-4)


def test_release_states_renormalise_at_the_last_layer_only():
    """The release patches ``output_hidden_states[l + 1]``: the target's own states leave every layer but the last
    unchanged; at the last, the state after the final norm is normalised again."""
    target = _model(0)
    full, _, s2 = depth_scores(target, _perturbed(target, 1), target, ITEMS, pad_id=2)
    for f, row in zip(full, s2):
        assert row[:-1] == pytest.approx([f] * (N_LAYERS - 1), abs=1e-5)
        assert abs(row[-1] - f) > 1e-3


def test_patching_the_last_layer_gives_the_retain_models_scores():
    """Retain differs from the target only in its decoder layers: its last layer's output, patched in at the span
    positions, gives the target exactly the retain model's logits there."""
    target = _model(0)
    retain = _perturbed(target, 1)
    _, s1, _ = depth_scores(target, retain, target, ITEMS, pad_id=2, states="layer_output")
    assert [row[-1] for row in s1] == pytest.approx(_scores(retain), abs=1e-5)
    assert _scores(retain) != pytest.approx(_scores(target), abs=1e-3)


def test_layer_subset_and_order_of_items():
    target, retain, unlearned = _model(0), _perturbed(_model(0), 1), _perturbed(_model(0), 2)
    full, s1, s2 = depth_scores(target, retain, unlearned, ITEMS, pad_id=2)
    f1, t1, t2 = depth_scores(target, retain, unlearned, ITEMS[::-1], pad_id=2, batch_size=1, layers=[1])
    assert f1 == pytest.approx(full[::-1], abs=1e-6)
    assert [r[0] for r in t1] == pytest.approx([r[1] for r in s1[::-1]], abs=1e-5)
    assert [r[0] for r in t2] == pytest.approx([r[1] for r in s2[::-1]], abs=1e-5)
