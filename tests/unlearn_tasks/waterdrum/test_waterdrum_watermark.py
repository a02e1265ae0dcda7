"""WaterDrum watermarking: the logits processor on a uniform toy model, and paraphrasing with a tiny model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import iv

from unlearn_tasks.waterdrum.permutation import permutation
from unlearn_tasks.waterdrum.verify import perturbation_function, verify_tokens
from unlearn_tasks.waterdrum.watermark import WaterfallLogitsProcessor, paraphrase_prompt, watermark_texts

N = 1000


def _sample_uniform(owner: int, kappa: float, k_p: int = 1, rows: int = 16, steps: int = 200, seed: int = 0) -> np.ndarray:
    """Generate from a model whose logits are all equal (plus a few special ids), watermarked."""
    gen = torch.Generator().manual_seed(seed)
    proc = WaterfallLogitsProcessor(owner, kappa, k_p, N)
    ids = torch.randint(0, N, (rows, 3), generator=gen)  # the "prompt"
    prompt_len = ids.shape[1]
    for _ in range(steps):
        logits = torch.zeros(rows, N + 8)
        logits[:, N:] = -float("inf")  # special ids are never sampled
        probs = torch.softmax(proc(ids, logits), dim=-1)
        ids = torch.cat([ids, torch.multinomial(probs, 1, generator=gen)], dim=1)
    return ids[:, prompt_len:].numpy()  # the verified text excludes the prompt


def test_uniform_model_score_matches_von_mises_mean() -> None:
    kappa = 2.0
    expected = iv(1, kappa) / iv(0, kappa)  # ~0.698
    texts = _sample_uniform(owner=7, kappa=kappa)
    scores, lengths = verify_tokens(list(texts), [7, 8, 0], [1, 2], N, return_lengths=True)
    pooled = (scores * lengths[:, None, None]).sum(0) / lengths.sum()
    assert lengths.sum() == 16 * 199
    assert abs(pooled[0, 0] - expected) < 0.03  # standard error ~0.007
    assert abs(pooled[1, 0]) < 0.05 and abs(pooled[2, 0]) < 0.05  # wrong ids
    # key 2 is the second harmonic of the same tilt: E[cos 2theta] = I2/I0 (~0.31), not 0
    assert abs(pooled[0, 1] - iv(2, kappa) / iv(0, kappa)) < 0.04
    unmarked = _sample_uniform(owner=7, kappa=0.0, seed=1)
    assert abs(verify_tokens(list(unmarked), 7, 1, N).mean()) < 0.05


def test_sine_key_is_detected_by_its_own_key_only() -> None:
    k_sine = N // 2 - 1 + 3  # sin with frequency 3
    texts = _sample_uniform(owner=2, kappa=2.0, k_p=k_sine, rows=8, steps=150, seed=3)
    scores = verify_tokens(list(texts), 2, [k_sine, 3], N).mean(0)[0]
    assert scores[0] > 0.55 and abs(scores[1]) < 0.07


def test_processor_skips_first_generated_token_and_special_ids() -> None:
    proc = WaterfallLogitsProcessor(5, kappa=2.0, k_p=1, vocab_size=N)
    prompt = torch.tensor([[4, 9, 11], [1, 2, 3]])
    logits = torch.randn(2, N + 4)
    assert torch.equal(proc(prompt, logits), logits)  # first generated token: untouched
    step = torch.cat([prompt, torch.tensor([[42], [N + 1]])], dim=1)
    out = proc(step, logits)
    phi = 2.0 * perturbation_function(1, N)
    for row, prev in enumerate([42, N + 1]):
        expected = phi[permutation(5, prev, N)]
        np.testing.assert_allclose((out[row, :N] - logits[row, :N]).numpy(), expected, atol=1e-5)
        assert torch.equal(out[row, N:], logits[row, N:])
    proc.reset()
    assert torch.equal(proc(step, logits), logits)
    with pytest.raises(ValueError):  # logits narrower than the watermark vocabulary
        proc(torch.cat([step, step[:, -1:]], dim=1), torch.zeros(2, N - 1))
    with pytest.raises(ValueError):
        WaterfallLogitsProcessor(-1)
    with pytest.raises(ValueError):
        WaterfallLogitsProcessor(1, kappa=float("nan"))


def test_watermark_texts_with_tiny_model(tiny_model_dir) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    model.eval()
    torch.manual_seed(0)
    texts = ["The author was born in a small town.", "Her first novel was about the sea.", "He writes poems."]
    out = watermark_texts(model, tok, texts, id=3, kappa=4.0, do_sample=True, max_new_tokens=60, batch_size=2)
    assert len(out) == 3 and all(isinstance(t, str) for t in out)
    encoded = [tok.encode(t, add_special_tokens=False) for t in out]
    scores = verify_tokens(encoded, [3, 4], 1, tok.vocab_size)
    lengths = np.array([max(len(e) - 1, 0) for e in encoded])
    pooled = (scores[:, :, 0] * lengths[:, None]).sum(0) / max(lengths.sum(), 1)
    assert pooled[0] > 0.3 and pooled[0] > pooled[1] + 0.2
    assert "Question: Q?" in paraphrase_prompt(tok, "A.", "Q?")
    with pytest.raises(TypeError):
        watermark_texts(model, tok, "one string", id=3)
