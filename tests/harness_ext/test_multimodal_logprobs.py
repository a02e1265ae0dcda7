"""Image-conditioned answer log-probabilities on lm-eval's hf-multimodal backend equal a direct forward pass."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("PIL")
torch = pytest.importorskip("torch")

from lm_eval.api.instance import Instance  # noqa: E402

from harness_ext.request_types import ANSWER_LOGPROBS, install_request_types  # noqa: E402
from unlearn_methods.scaffolding.faces import draw_face  # noqa: E402


@pytest.fixture(scope="module")
def lm(tiny_llava_dir):
    from lm_eval.models.hf_vlms import HFMultimodalLM

    install_request_types()
    return HFMultimodalLM(pretrained=str(tiny_llava_dir), device="cpu", batch_size=3)


def _request(ctx: str, cont: str, images: list | None = None) -> Instance:
    args = (ctx, cont) if images is None else (ctx, cont, {"visual": images})
    return Instance(request_type=ANSWER_LOGPROBS, doc={}, arguments=args, idx=0)


def _direct(lm, ctx: str, cont: str, images: list) -> tuple[list[float], list[float]]:
    """Per-token log-probs of the continuation + EOS, and the vocabulary means, from one plain forward pass."""
    proc = lm.processor
    whole = proc(text=ctx + cont, images=images, return_tensors="pt")
    context = proc(text=ctx, images=images, return_tensors="pt")
    n = whole["input_ids"].shape[1] - context["input_ids"].shape[1]
    ids = torch.cat([whole["input_ids"], torch.tensor([[lm.eot_token_id]])], dim=1)
    with torch.no_grad():
        logits = lm.model(input_ids=ids, pixel_values=whole["pixel_values"]).logits
    logp = torch.log_softmax(logits.float(), -1)[0]
    L = ids.shape[1]
    targets = ids[0, L - n - 1 :]
    lp = logp[L - n - 2 : L - 1]
    mean = (lp.exp() * lp).sum(-1)
    return lp.gather(-1, targets[:, None]).squeeze(-1).tolist(), mean.tolist()


def test_image_logprobs_equal_direct_forward_with_batching(lm):
    faces = [draw_face(p, k) for p in range(3) for k in range(2)]
    cases = [
        ("<image>\nQuestion: Who is this?\nAnswer:", " Amira Okafor", [faces[0]]),
        ("<image>\nQuestion: Who is this?\nAnswer:", " Bastian Lindqvist", [faces[2]]),
        ("<image>\nQuestion: Describe the person.\nAnswer:", " Chiara has red hair, blue eyes and a round face.", [faces[4]]),
        ("<image> and <image>\nQuestion: Same person?\nAnswer:", " yes", [faces[0], faces[1]]),
        ("<image>\nThe name of the person on the image is", " Amira", [faces[5]]),
    ]
    out = getattr(lm, ANSWER_LOGPROBS)([_request(*c) for c in cases])
    assert len(out) == len(cases)
    for (ctx, cont, images), got in zip(cases, out, strict=True):
        want, want_mean = _direct(lm, ctx, cont, images)
        assert len(got["logprobs"]) == len(want) >= 2
        assert got["logprobs"] == pytest.approx(want, abs=1e-4)
        assert got["vocab_mean"] == pytest.approx(want_mean, abs=1e-4)
        assert all(v >= 0 for v in got["vocab_var"])


def test_logprobs_depend_on_the_image(lm):
    ctx, cont = "<image>\nQuestion: Who is this?\nAnswer:", " Amira Okafor"
    a, b = getattr(lm, ANSWER_LOGPROBS)([_request(ctx, cont, [draw_face(0)]), _request(ctx, cont, [draw_face(9)])])
    assert len(a["logprobs"]) == len(b["logprobs"])
    assert max(abs(x - y) for x, y in zip(a["logprobs"], b["logprobs"], strict=True)) > 1e-6


def test_text_only_requests_match_the_hf_text_path(lm):
    from harness_ext.answer_logprobs import hf_answer_logprobs

    reqs = [_request("Question: Who is Amira?\nAnswer:", " A writer."), _request("Question: Hair?\nAnswer:", " red")]
    mixed = getattr(lm, ANSWER_LOGPROBS)(reqs + [_request("<image>\nAnswer:", " x", [draw_face(1)])])
    text = hf_answer_logprobs(lm, reqs)
    for got, want in zip(mixed[:2], text, strict=True):
        assert got["logprobs"] == pytest.approx(want["logprobs"], abs=1e-5)


def test_chat_template_places_the_processor_image_token(lm):
    chat = [{"role": "user", "content": "<image>Who is this?"}]
    prompt = lm.apply_chat_template(chat, add_generation_prompt=True)
    try:
        assert prompt == "USER: <image>\nWho is this? ASSISTANT:"
        got = getattr(lm, ANSWER_LOGPROBS)([_request(prompt, " Amira Okafor", [draw_face(0)])])[0]
        want, _ = _direct(lm, prompt, " Amira Okafor", [draw_face(0)])
        assert got["logprobs"] == pytest.approx(want, abs=1e-4)
        assert all(math.isfinite(v) for v in got["logprobs"])
    finally:
        lm.chat_applied = False


def test_other_backends_refuse_image_requests():
    from harness_ext.answer_logprobs import answer_logprobs

    class Other:
        pass

    with pytest.raises(NotImplementedError, match="hf-multimodal"):
        answer_logprobs(Other(), [_request("<image>x", " y", [draw_face(0)])])


def test_append_eos_false_drops_only_the_eos(lm):
    ctx, cont, images = "<image>\nQuestion: Who is this?\nAnswer:", " Amira Okafor", [draw_face(0)]
    with_eos = getattr(lm, ANSWER_LOGPROBS)([_request(ctx, cont, images)])[0]["logprobs"]
    req = Instance(request_type=ANSWER_LOGPROBS, doc={}, idx=0,
                   arguments=(ctx, cont, {"visual": images, "append_eos": False}))
    without = getattr(lm, ANSWER_LOGPROBS)([req])[0]["logprobs"]
    assert without == pytest.approx(with_eos[:-1], abs=1e-5)


def test_generation_of_a_mixed_batch_routes_each_request_to_its_path():
    from harness_ext.multimodal import generate_until_split

    def image_path(self, requests, disable_tqdm=False):
        assert all(len(r.args) == 3 and r.args[2]["visual"] for r in requests)
        return [f"image:{r.args[0]}" for r in requests]

    def text_path(self, requests, disable_tqdm=False):
        assert all(len(r.args) == 2 for r in requests)
        return [f"text:{r.args[0]}" for r in requests]

    gen = generate_until_split(image_path, text_path)
    face = draw_face(0)
    reqs = [Instance(request_type="generate_until", doc={}, idx=0, arguments=args) for args in
            [("a", {}), ("b", {}, {"visual": [face]}), ("c", {}, {"visual": []}), ("d", {}, {"visual": [face]})]]
    assert gen(None, reqs) == ["text:a", "image:b", "text:c", "image:d"]
    assert gen(None, [reqs[1]]) == ["image:b"] and gen(None, [reqs[0]]) == ["text:a"]


def test_vllm_vlm_path_reads_the_continuation_and_eos_prompt_logprobs(monkeypatch):
    """The vllm-vlm code path with a stand-in engine (vLLM's CPU build cannot start a LLaVA here; see README): it
    scores through lm-eval's own ``_multimodal_model_generate``, which applies the LoRA adapter and spreads the
    prompts over the replicas of ``data_parallel_size``."""
    import types

    from harness_ext.multimodal import vllm_vlm_answer_logprobs

    class Tok:
        def __call__(self, text):
            return {"input_ids": text.replace("<image>", " <image> ").split()}

        def decode(self, ids):
            return " </s>"

    seen = {}

    class Engine:
        def _multimodal_model_generate(self, requests, generate):
            seen["prompts"], seen["generate"] = requests, generate
            outs = []
            for p in requests:
                words = p["prompt"].replace("<image>", " <image> ").split()
                ids = [hash(w) % 1000 for w in words]
                outs.append(types.SimpleNamespace(prompt_token_ids=ids,
                                                  prompt_logprobs=[None] + [{t: -0.1 * k} for k, t in enumerate(ids[1:], 1)]))
            return outs

    engine = Engine()
    lm = types.SimpleNamespace(tokenizer=Tok(), eot_token_id=9, rank=0,
                               _multimodal_model_generate=engine._multimodal_model_generate)
    req = _request("<image> Q: who?", " Ann Lee", [draw_face(0)])
    out = vllm_vlm_answer_logprobs(lm, [req], lambda lm, reqs: [])
    # words: <image> Q: who? Ann Lee </s> -> the last three are the continuation (2) + EOS (1)
    assert out[0]["logprobs"] == pytest.approx([-0.3, -0.4, -0.5]) and out[0]["vocab_mean"] is None
    assert seen["prompts"][0]["prompt"] == "<image> Q: who? Ann Lee </s>"
    assert seen["prompts"][0]["multi_modal_data"]["image"][0].size == (32, 32)
    assert seen["generate"] is False  # lm-eval's scoring call: prompt_logprobs=1, one token
