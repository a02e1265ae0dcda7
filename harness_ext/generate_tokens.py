"""The request type ``unlearn_generate_tokens``: greedy generation of exactly a document's token budget.

Generation runs under the model's *own* generation config (no lm-eval stop sequences, so a model whose generation
config does not stop at the tokenizer's EOS runs past it) and is decoded with special tokens kept: how benchmark
releases that call ``model.generate`` + ``tokenizer.decode`` generate. A request is ``(context, {"max_new_tokens":
n})`` or ``(context, continuation, {...})``; ``context_ids`` in the dict gives the prompt's tokens. Implemented for
``hf`` and ``vllm`` (and subclasses); other backends get a clear error.
"""

from __future__ import annotations

from typing import Any

from harness_ext.lm_eval_patches import hf_batch_size, is_backend, request_options

GENERATE_TOKENS = "unlearn_generate_tokens"


def _budget_request(lm: Any, req: Any) -> tuple[list[int], int]:
    """(context ids, number of new tokens): ``context_ids`` if the task tokenised the prompt, else lm-eval's."""
    options = request_options(req) or request_options(req, 1)
    ids = list(options.get("context_ids") or []) or lm.tok_encode(req.args[0])
    return ids, int(options["max_new_tokens"])


def _stop_ids(generation_config: Any) -> set[int]:
    eos = getattr(generation_config, "eos_token_id", None)
    return set(eos if isinstance(eos, (list, tuple)) else [] if eos is None else [eos])


def hf_generate_tokens(lm: Any, requests: list) -> list[str]:
    """The ``hf`` implementation: ``model.generate`` on left-padded batches."""
    import torch
    from tqdm import tqdm

    if getattr(lm, "backend", "causal") != "causal":
        raise NotImplementedError("Token-budget generation supports causal language models only.")
    encoded = [_budget_request(lm, req) for req in requests]
    stops = _stop_ids(lm.model.generation_config)
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else lm.eot_token_id
    batch_size = hf_batch_size(lm)
    results: list[str] = [""] * len(encoded)
    for start in tqdm(range(0, len(encoded), batch_size), desc="Generating to token budgets", disable=lm.rank != 0):
        idx = list(range(start, min(start + batch_size, len(encoded))))
        width = max(len(encoded[i][0]) for i in idx)
        ids = torch.full((len(idx), width), pad, dtype=torch.long, device=lm.device)
        mask = torch.zeros((len(idx), width), dtype=torch.long, device=lm.device)
        for r, i in enumerate(idx):  # left padding, as generation needs
            row = encoded[i][0]
            ids[r, width - len(row):] = torch.tensor(row, dtype=torch.long)
            mask[r, width - len(row):] = 1
        with torch.no_grad():
            out = lm.model.generate(input_ids=ids, attention_mask=mask, do_sample=False, pad_token_id=pad,
                                    max_new_tokens=max(encoded[i][1] for i in idx))
        for r, i in enumerate(idx):
            new = out[r, width:].tolist()[: encoded[i][1]]
            end = next((k + 1 for k, t in enumerate(new) if t in stops), len(new))  # a stopped row is then padded
            results[i] = lm.tokenizer.decode(new[:end], skip_special_tokens=False)
    return results


def vllm_generate_tokens(lm: Any, requests: list) -> list[str]:
    """The ``vllm`` implementation: greedy sampling with the model's own stop tokens."""
    from transformers import GenerationConfig
    from vllm import SamplingParams

    try:  # stop where the model's own generation config stops (as transformers' generate), not at the tokenizer's EOS
        stops = _stop_ids(GenerationConfig.from_pretrained(lm.model_args["model"]))
    except Exception:  # noqa: BLE001 - no generation config: the tokenizer's EOS, as transformers would use
        stops = {lm.eot_token_id}
    encoded = [_budget_request(lm, req) for req in requests]
    params = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True, stop_token_ids=sorted(stops),
                             skip_special_tokens=False) for _, n in encoded]
    outputs = lm._model_generate(requests=[ids for ids, _ in encoded], generate=True, sampling_params=params)
    return [lm.tokenizer.decode(list(out.outputs[0].token_ids), skip_special_tokens=False) for out in outputs]


def generate_tokens(self: Any, requests: list) -> list[str]:
    """``LM.unlearn_generate_tokens``: greedy generation of ``max_new_tokens`` per request (see the module doc)."""
    if is_backend(self, "hf"):
        return hf_generate_tokens(self, requests)
    if is_backend(self, "vllm"):
        return vllm_generate_tokens(self, requests)
    raise NotImplementedError(
        f"Generation to a release's token budget (parity mode) is implemented for the 'hf' and 'vllm' backends "
        f"(and their subclasses); {type(self).__name__} is neither. Run with --model hf or --model vllm."
    )
