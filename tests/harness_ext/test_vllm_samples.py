"""The grouping of a marked request's repeats copies into one vLLM request (harness_ext.vllm_samples), without
vLLM: which requests are grouped, in what order, how the n samples go back to the copies, and that everything else
reaches lm-eval's own generate_until unchanged (tests/vllm_backend/test_leak_vllm.py runs it on vLLM)."""

from lm_eval.api.instance import Instance

import harness_ext.vllm_samples as vllm_samples
from harness_ext.vllm_samples import (
    mark_samples_in_one_request,
    patch_vllm_generation,
    sample_groups,
)

SAMPLED = {"until": [], "do_sample": True, "temperature": 1.0, "top_p": 1.0, "max_gen_toks": 8}


def _request(ctx: str, gen_kwargs: dict, marked: bool) -> Instance:
    request = Instance(request_type="generate_until", doc={}, arguments=(ctx, dict(gen_kwargs)), idx=0)
    return mark_samples_in_one_request(request) if marked else request


def _requests():
    """lm-eval's cloned list: a (3 copies) and b (2) marked and sampled; g greedy; c marked but greedy
    (``--gen_kwargs do_sample=False``); u sampled but unmarked (e.g. WaterDrum's K generations)."""
    a, b = _request("A", SAMPLED, True), _request("B", SAMPLED, True)
    g = _request("G", {"until": ["\n"], "do_sample": False}, False)
    c = _request("C", {**SAMPLED, "do_sample": False}, True)
    u = _request("U", SAMPLED, False)
    return [a, g, a, b, u, a, b, c, c, u]


def test_groups_are_the_copies_of_marked_sampled_requests():
    plain, groups = sample_groups(_requests())
    assert plain == [1, 4, 7, 8, 9]
    assert groups == [[0, 2, 5], [3, 6]]  # by first copy; each copy's position in order


def test_equal_but_distinct_requests_are_separate_groups():
    """Two documents asking the same question are two requests (two objects), so two groups."""
    one, two = _request("A", SAMPLED, True), _request("A", SAMPLED, True)
    assert sample_groups([one, two, one, two]) == ([], [[0, 2], [1, 3]])


def test_samples_fan_out_to_the_copies_in_order(monkeypatch):
    requests = _requests()
    asked = []

    def fake_groups(lm, reps, counts):
        asked.append(([r.args[0] for r in reps], counts))
        return [[f"{r.args[0]}{i}" for i in range(n)] for r, n in zip(reps, counts, strict=True)]

    monkeypatch.setattr(vllm_samples, "generate_sample_groups", fake_groups)
    run_calls = []

    def run(part):
        run_calls.append(part)
        return [f"lm-eval {r.args[0]}" for r in part]

    out = vllm_samples.generate_until_grouped(object(), requests, run)
    assert asked == [(["A", "B"], [3, 2])]  # one request per prompt, n = its number of copies
    assert [[r.args[0] for r in part] for part in run_calls] == [["G", "U", "C", "C", "U"]]
    assert out == ["A0", "lm-eval G", "A1", "B0", "lm-eval U", "A2", "B1", "lm-eval C", "lm-eval C", "lm-eval U"]


def test_without_marked_samples_lm_eval_gets_the_same_call():
    calls = []

    class Backend:
        def generate_until(self, requests, disable_tqdm=False):
            calls.append((requests, disable_tqdm))
            return [r.args[0] for r in requests]

    patch_vllm_generation(Backend)
    patch_vllm_generation(Backend)  # idempotent
    requests = [_request("G", {"until": ["\n"]}, False), _request("U", SAMPLED, False)] * 2
    assert Backend().generate_until(requests, True) == ["G", "U", "G", "U"]
    assert len(calls) == 1 and calls[0][0] is requests and calls[0][1] is True


def test_switched_off_every_request_takes_lm_eval_s_path(monkeypatch):
    monkeypatch.setenv(vllm_samples.ENV_SWITCH, "0")
    requests = _requests()
    calls = []
    out = vllm_samples.generate_until_grouped(object(), requests, lambda part: calls.append(part) or ["x"] * len(part))
    assert calls == [requests] and out == ["x"] * len(requests)
