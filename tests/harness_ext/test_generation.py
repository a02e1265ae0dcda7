"""Greedy generation with continuous batching (harness_ext.generation): the texts lm-eval scores are those of
lm-eval's own path, with fewer rows computed and the batch kept full."""

from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

import harness_ext.generation as generation
from harness_ext.evaluate import run_lm_eval
from harness_ext.generation import ENV_SWITCH, _eligible, generate_continuously
from unlearn_methods.scaffolding.tofu_corpus import training_records
from unlearn_tasks.prompts import question_prompt

TASK = "tofu_forget10_rouge"


class RowSteps:
    """Counts the rows a causal LM computes: the batch size of every forward call of a ``*ForCausalLM`` module."""

    def __init__(self) -> None:
        self.rows = 0

    def __call__(self, module, args, output) -> None:
        if type(module).__name__.endswith("ForCausalLM"):
            self.rows += int(output.logits.shape[0])


def scored_texts(model_dir: Path, task: str, out: Path, metadata: dict, fast: bool, monkeypatch,
                 gen_kwargs: str | None = None) -> tuple[list[str], int]:
    """(the text lm-eval scores for every document, in document order; the rows computed), one path or the other."""
    monkeypatch.setenv(ENV_SWITCH, "1" if fast else "0")
    counter = RowSteps()
    handle = torch.nn.modules.module.register_module_forward_hook(counter)
    try:
        res = run_lm_eval(model_dir, [task], out, metadata, batch_size=8, log_samples=True, gen_kwargs=gen_kwargs)
    finally:
        handle.remove()
    samples = sorted(res["samples"][task], key=lambda s: s["doc_id"])
    return [s["filtered_resps"][0] for s in samples], counter.rows


def _prompts(n: int) -> list[str]:
    return [question_prompt(r["question"]) for r in training_records()[:n]]  # the task's generation prompt


@pytest.fixture(scope="module")
def tiny_model_ending_early(tiny_model_dir, tmp_path_factory) -> Path:
    """The tiny model with re-drawn weights (std 0.3: varied greedy answers) and, as extra EOS ids in its generation
    config, the six tokens that the most answers contain after their first step, so that the rows of a batch end at
    different steps (the tiny model never emits the tokenizer's EOS)."""
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    torch.manual_seed(0)
    with torch.no_grad():
        for weight in (p for p in model.parameters() if p.dim() == 2):
            weight.normal_(0.0, 0.3)
    count: dict[int, int] = {}  # token id -> the number of answers that contain it (not as their first token)
    for prompt in _prompts(24):
        ids = tok(prompt, return_tensors="pt").input_ids
        new = model.generate(ids, max_new_tokens=60, do_sample=False, pad_token_id=tok.pad_token_id)[0, ids.shape[1]:]
        for t in set(new.tolist()[1:]) - {new[0].item()}:
            count[t] = count.get(t, 0) + 1
    ends = sorted(count, key=lambda t: (-count[t], t))[:6]
    model.generation_config.eos_token_id = [tok.eos_token_id, *ends]
    out = tmp_path_factory.mktemp("tiny_early_eos")
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def lm_eval_texts(tiny_model_ending_early, demo_data_dir, tmp_path_factory) -> tuple[list[str], int]:
    """The texts and rows of lm-eval's own path on the tiny model ending early."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        return scored_texts(tiny_model_ending_early, TASK, tmp_path_factory.mktemp("lm_eval_path"),
                            {"data_dir": str(demo_data_dir)}, False, monkeypatch)


def test_tiny_model_texts_are_unchanged_with_fewer_rows_computed(tiny_model_ending_early, demo_data_dir, tmp_path,
                                                                  monkeypatch, lm_eval_texts):
    meta = {"data_dir": str(demo_data_dir)}
    calls = []
    original = generation.generate_continuously

    def spy(lm, context, mask, max_length, eos, concurrency, progress=False):
        calls.append((context.shape[0], concurrency))
        return original(lm, context, mask, max_length, eos, concurrency, progress)

    monkeypatch.setattr(generation, "generate_continuously", spy)
    old, old_rows = lm_eval_texts
    new, new_rows = scored_texts(tiny_model_ending_early, TASK, tmp_path / "new", meta, True, monkeypatch)
    assert calls == [(68, 8)]  # every request in one loop keeping 8 rows going, not 9 batches
    assert len(old) == 68 and new == old
    assert len({len(t) for t in old}) > 10  # the rows did end at different steps
    assert new_rows < 0.8 * old_rows


def _prompt_batch(tok, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    enc = [tok(p, add_special_tokens=False).input_ids for p in prompts]
    width = max(map(len, enc))
    ids = torch.tensor([[tok.pad_token_id] * (width - len(e)) + e for e in enc])
    return ids, torch.tensor([[0] * (width - len(e)) + [1] * len(e) for e in enc])


def test_each_row_is_generate_on_its_own_prompt(tiny_model_ending_early):
    """Every row of a continuous run (3 rows at a time, 7 prompts of different lengths, some hidden positions inside
    a prompt as under open-unlearning's mask) equals greedy ``generate`` on that prompt alone."""
    from types import SimpleNamespace

    tok = AutoTokenizer.from_pretrained(tiny_model_ending_early)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_ending_early, dtype=torch.float32).eval()
    prompts = [p + " x" * k for k, p in zip((0, 9, 2, 14, 5, 1, 7), _prompts(7), strict=True)]
    ids, mask = _prompt_batch(tok, prompts)
    mask[1, -4] = 0  # a hidden position inside the second prompt
    eos = set(model.generation_config.eos_token_id)
    lm = SimpleNamespace(model=model, tokenizer=tok)
    with torch.no_grad():
        out = generate_continuously(lm, ids, mask, ids.shape[1] + 40, eos, concurrency=3)
        for i in range(len(prompts)):
            start = int(mask[i].nonzero()[0])
            alone = model.generate(ids[i : i + 1, start:], attention_mask=mask[i : i + 1, start:], do_sample=False,
                                   max_new_tokens=40, pad_token_id=tok.pad_token_id)[0, ids.shape[1] - start :]
            ours = out[i, ids.shape[1] :].tolist()
            assert ours[: len(alone)] == alone.tolist(), i
            assert set(ours[len(alone) :]) <= {tok.pad_token_id}
    ends = [next((j for j, t in enumerate(out[i, ids.shape[1] :].tolist()) if t in eos), None) for i in range(7)]
    assert len(set(ends)) > 2  # rows ended at different steps, so rows joined mid-way


class _PastKeyValuesNaming(torch.nn.Module):
    """``model`` behind the ``forward`` of transformers before 5.2x (the cache as ``past_key_values``; vLLM's CPU
    wheel pins 5.19); with ``fill=False`` it takes the cache but never fills it."""

    def __init__(self, model, fill: bool = True):
        super().__init__()
        self.inner, self.config, self.fill = model, model.config, fill

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=None,
                logits_to_keep=0):
        cache = {generation._cache_argument(self.inner): past_key_values} if self.fill else {}
        return self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                          use_cache=use_cache, logits_to_keep=logits_to_keep, **cache)


def test_cache_passed_under_the_name_forward_takes(tiny_model_ending_early):
    """A ``forward`` taking the cache as ``past_key_values`` gets it under that name (same rows as under ``cache``);
    one that leaves the given cache empty is refused (lm-eval's batches then), never joined as empty."""
    from types import SimpleNamespace

    tok = AutoTokenizer.from_pretrained(tiny_model_ending_early)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_ending_early, dtype=torch.float32).eval()
    ids, mask = _prompt_batch(tok, [p + " x" * k for k, p in zip((0, 9, 2, 5), _prompts(4), strict=True)])
    eos = set(model.generation_config.eos_token_id)
    with torch.no_grad():
        expected = generate_continuously(SimpleNamespace(model=model, tokenizer=tok), ids, mask, ids.shape[1] + 30,
                                         eos, concurrency=2)
        older = SimpleNamespace(model=_PastKeyValuesNaming(model), tokenizer=tok)
        assert torch.equal(generate_continuously(older, ids, mask, ids.shape[1] + 30, eos, concurrency=2), expected)
        unfilled = SimpleNamespace(model=_PastKeyValuesNaming(model, fill=False), tokenizer=tok)
        with pytest.raises(generation._NoRowSelection):
            generate_continuously(unfilled, ids, mask, ids.shape[1] + 30, eos, concurrency=2)


def test_lm_eval_batches_when_the_cache_cannot_be_joined(tiny_model_ending_early, demo_data_dir, tmp_path,
                                                         monkeypatch, lm_eval_texts):
    """A model whose cache rows cannot be joined (here: forced) falls back to lm-eval's own batches inside the one
    call: the texts of lm-eval's path exactly."""
    meta = {"data_dir": str(demo_data_dir)}

    def refuse(*args, **kwargs):
        raise generation._NoRowSelection

    old, _ = lm_eval_texts
    monkeypatch.setattr(generation, "generate_continuously", refuse)
    new, _ = scored_texts(tiny_model_ending_early, TASK, tmp_path / "new", meta, True, monkeypatch)
    assert new == old


def test_generation_config_processors_take_lm_eval_path(tiny_model_dir):
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(tiny_model_dir), batch_size=8, device="cpu")
    assert generation._plain_argmax(lm)
    lm.model.generation_config.repetition_penalty = 1.3  # greedy is then not the argmax of the logits
    assert not generation._plain_argmax(lm)
    lm.model.generation_config.repetition_penalty = 1.0
    lm.model.config.sliding_window = 16  # a cache this module does not pad and join
    assert not generation._plain_argmax(lm)


def test_real_stop_strings_sampling_and_peft_take_lm_eval_path(tiny_model_dir):
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(tiny_model_dir), batch_size=8, device="cpu")
    eos = {lm.eot_token_id}
    eos_text = lm.tokenizer.decode([lm.eot_token_id], skip_special_tokens=False)
    assert _eligible(lm, [eos_text], {"do_sample": False}, eos)
    assert not _eligible(lm, ["\n\n", eos_text], {"do_sample": False}, eos)  # MUSE KnowMem's cut: lm-eval's path
    assert not _eligible(lm, [eos_text], {"do_sample": True, "temperature": 0.7}, eos)
    assert not _eligible(lm, [eos_text], {"do_sample": False, "num_beams": 2}, eos)
    assert not _eligible(lm, [eos_text], {"do_sample": False}, set())  # no EOS the model stops at


@pytest.mark.slow
@pytest.mark.optional
def test_smollm2_texts_are_unchanged(smollm2_dir, tmp_path, monkeypatch):
    """SmolLM2-135M-Instruct after TOFU's 'Answer: ' on the real-model data: answers of real, varied lengths (a real
    tokenizer and EOS, grouped-query attention, 30 layers).

    The 24 answers are cut at 64 tokens, not the task's 200: 15 of them end at an EOS first, after 6 to 63 tokens
    (14 different lengths), so rows still leave and join the running batch at many steps; the other 9 mostly
    repeat themselves past 64 tokens, and generating them to 200 (lm-eval's batches run to their longest row) took
    2.6 times as long (241 s against 93 s on the shared 2-core machine, loaded, 2026-11-29)."""
    from fixtures import real_model as real_model_data

    data = real_model_data.write(tmp_path / "data")
    meta = {"data_dir": str(data), "answer_scoring": "tofu"}
    cut = "max_gen_toks=64"
    old, old_rows = scored_texts(smollm2_dir, "tofu_forget01_rouge", tmp_path / "old", meta, False, monkeypatch, cut)
    new, new_rows = scored_texts(smollm2_dir, "tofu_forget01_rouge", tmp_path / "new", meta, True, monkeypatch, cut)
    assert new == old and any(t.strip() for t in old)
    assert len({len(t) for t in old}) > 10  # the rows did end at different steps
    assert new_rows < old_rows
