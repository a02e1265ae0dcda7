"""Leak@k on lm-eval's vllm backend: the leak_n samples of a prompt are one engine request (SamplingParams n =
leak_n), n distinct samples per prompt, Leak@k computed from them; switched off, lm-eval's leak_n copies; a greedy
task sends the engine exactly what lm-eval's own path sends."""

import pytest

from harness_ext.evaluate import evaluate_lm, model_arguments
from harness_ext.vllm_samples import ENV_SWITCH
from unlearn_tasks.metrics.leak import mean_leak_at_k
from unlearn_tasks.metrics.rouge import rouge_l_recall

TASK = "tofu_forget01_leak"
N = 6
LEAK = {"leak_n": N, "leak_k": [1, 3, 6], "leak_max_new_tokens": 16, "leak_criterion": "rougeL_recall",
        "leak_threshold": 0.2}


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    """One vLLM backend on the untrained tiny model (its samples differ from one another) for the whole module, with
    every engine ``generate`` call recorded as (prompt token ids, sampling parameters) pairs."""
    from lm_eval.models.vllm_causallms import VLLM

    lm = VLLM(**model_arguments(tiny_model_dir, "vllm"), batch_size=16)
    calls: list[list[tuple[list[int], object]]] = []
    generate = lm.model.generate

    def recorded(prompts, sampling_params=None, **kwargs):
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(prompts)
        calls.append([(list(p["prompt_token_ids"]), sp) for p, sp in zip(prompts, params, strict=True)])
        return generate(prompts, sampling_params=sampling_params, **kwargs)

    lm.model.generate = recorded
    return lm, calls


def _leak_run(lm, demo_data_dir, tmp_path):
    meta = {"data_dir": str(demo_data_dir), **LEAK}
    return evaluate_lm(lm, [TASK], tmp_path, meta, log_samples=True)


def test_leak_samples_are_one_request_per_prompt(engine, demo_data_dir, tmp_path):
    lm, calls = engine
    calls.clear()
    run = _leak_run(lm, demo_data_dir, tmp_path / "all")
    docs = run["samples"][TASK]
    sent = [pair for call in calls for pair in call]
    assert len(docs) >= 2 and len(sent) == len(docs)  # one engine request per question, not leak_n
    assert [sp.n for _, sp in sent] == [N] * len(docs)
    assert all(sp.seed is None for _, sp in sent)  # the engine's generator, seeded by the model arg seed, as lm-eval
    assert all(sp.temperature == 1.0 and sp.top_p == 1.0 and sp.max_tokens == 16 for _, sp in sent)
    for doc in docs:
        samples = doc["resps"][0]
        assert len(samples) == N and len(set(samples)) == N  # n distinct samples, each handed to one copy
        record = doc["leak_at_1"]
        recalls = [rouge_l_recall(doc["doc"]["answer"], s.strip()) for s in samples]
        assert record["rougeL_recall"] == pytest.approx(recalls)
        assert record["leaks"] == sum(r >= 0.2 for r in recalls) and record["n"] == N
    counts = [doc["leak_at_1"]["leaks"] for doc in docs]
    metrics = run["results"][TASK]
    for k in (1, 3, 6):
        assert metrics[f"leak_at_{k},none"] == pytest.approx(mean_leak_at_k(counts, N, k))


def _sent(lm, calls, task, out, metadata, monkeypatch, grouped: bool):
    """What the engine was sent for one run of ``task`` (limit 3): per call, (prompt ids, sampling parameters)."""
    monkeypatch.setenv(ENV_SWITCH, "1" if grouped else "0")
    calls.clear()
    evaluate_lm(lm, [task], out, metadata, limit=3)
    return [[(ids, repr(sp)) for ids, sp in call] for call in calls]


def test_a_greedy_task_sends_what_lm_eval_sends(engine, demo_data_dir, tmp_path, monkeypatch):
    lm, calls = engine
    meta = {"data_dir": str(demo_data_dir)}
    ours = _sent(lm, calls, "tofu_forget01_rouge", tmp_path / "ours", meta, monkeypatch, grouped=True)
    lm_eval = _sent(lm, calls, "tofu_forget01_rouge", tmp_path / "lm_eval", meta, monkeypatch, grouped=False)
    assert ours and lm_eval == ours
    assert all("n=1," in sp for call in ours for _, sp in call)


def test_switched_off_the_copies_are_lm_eval_s(engine, demo_data_dir, tmp_path, monkeypatch):
    """``UNLEARN_VLLM_SAMPLES=0``: lm-eval's path, leak_n requests of n = 1 per question (what the grouping saves)."""
    lm, calls = engine
    meta = {"data_dir": str(demo_data_dir), **LEAK}
    sent = _sent(lm, calls, TASK, tmp_path, meta, monkeypatch, grouped=False)
    assert sum(len(call) for call in sent) == 3 * N and all("n=1," in sp for call in sent for _, sp in call)
