"""The request types this package adds to lm-eval, by name: one module each.

- ``unlearn_answer_logprobs`` (:mod:`harness_ext.answer_logprobs`): per-token answer log-probabilities;
- ``unlearn_generate_tokens`` (:mod:`harness_ext.generate_tokens`): greedy generation to a token budget;
- ``unlearn_answer_gradnorm`` (:mod:`harness_ext.answer_gradnorm`): an answer loss's gradient norm (hf only).

A task names one as its ``OUTPUT_TYPE``; :func:`install_request_types` (called when one of our tasks is built)
puts them on lm-eval's ``LM`` base class. Adding a request type: a module with its name and its backends'
implementations, one line in :data:`REQUEST_TYPES`.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from harness_ext.answer_gradnorm import ANSWER_GRADNORM, answer_gradnorm
from harness_ext.answer_logprobs import ANSWER_LOGPROBS, answer_logprobs
from harness_ext.generate_tokens import GENERATE_TOKENS, generate_tokens
from harness_ext.lm_eval_patches import add_request_types, patch_multimodal_generation, quiet_git_hash

REQUEST_TYPES: dict[str, Callable[[Any, list], list]] = {
    ANSWER_LOGPROBS: answer_logprobs,
    GENERATE_TOKENS: generate_tokens,
    ANSWER_GRADNORM: answer_gradnorm,
}


def install_request_types() -> None:
    """Add our request types to lm-eval's ``LM`` base class (idempotent); let ``hf-multimodal`` generate for mixed
    batches; greedy ``hf`` generation with continuous batching, and ``--use_cache`` keys that tell
    open-unlearning's attention mask apart (:mod:`harness_ext.generation`); a marked request's ``repeats`` samples
    in one ``vllm`` request (:mod:`harness_ext.vllm_samples`); quiet lm-eval's git lookup. The patches of lm-eval's
    ``hf`` and ``vllm`` backends and evaluator are made when lm-eval imports those modules (at once if it has):
    building a task imports neither torch nor transformers."""
    from harness_ext.autoload import when_imported
    from harness_ext.generation import patch_generation_cache

    add_request_types(REQUEST_TYPES)
    when_imported("lm_eval.models.huggingface", _patch_hf_backends)
    when_imported("lm_eval.models.vllm_causallms", _patch_vllm_backend)
    patch_generation_cache()
    when_imported("lm_eval.evaluator", _quiet_git_hash)


def _patch_hf_backends(module: ModuleType) -> None:
    """The patches of ``hf-multimodal`` (which imports ``hf``) and ``hf``, in this order."""
    from harness_ext.generation import patch_hf_generation

    patch_multimodal_generation()
    patch_hf_generation()


def _patch_vllm_backend(module: ModuleType) -> None:
    from harness_ext.vllm_samples import patch_vllm_generation

    patch_vllm_generation(module.VLLM)


def _quiet_git_hash(module: ModuleType) -> None:
    quiet_git_hash()


__all__ = ["ANSWER_GRADNORM", "ANSWER_LOGPROBS", "GENERATE_TOKENS", "REQUEST_TYPES", "install_request_types"]
