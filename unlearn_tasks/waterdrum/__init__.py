"""WaterDrum / Waterfall watermark engine: keyed permutations, verification, watermarking, meta-evaluation.

Only numpy is imported eagerly; torch/transformers (watermarking), tiktoken/llama-models (tokenizer) and
matplotlib (plots) are imported by the functions that need them.
"""

from __future__ import annotations

from .owners import format_ids, parse_ids
from .permutation import DEFAULT_VOCAB_SIZE, keyed_positions, permutation
from .verify import perturbation_key, verify_texts, verify_tokens

__all__ = [
    "DEFAULT_VOCAB_SIZE",
    "format_ids",
    "keyed_positions",
    "parse_ids",
    "permutation",
    "perturbation_key",
    "verify_texts",
    "verify_tokens",
]
