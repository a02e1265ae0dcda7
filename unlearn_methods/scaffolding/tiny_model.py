"""A tiny Llama and a byte-level BPE tokenizer trained on a given corpus: the demo's and the tests' model.

head_dim is 64 (hidden 128, 2 heads) because vLLM's CPU attention rejects smaller heads.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from unlearn_methods import checkpoint_folder

SPECIAL_TOKENS = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}


def train_tokenizer(texts: Iterable[str], vocab_size: int = 1024) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer (GPT-2 style, like Phi-1.5 and Llama-3) trained on ``texts``."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIAL_TOKENS)
    fast.model_max_length = 512
    return fast


def tiny_llama_config(vocab_size: int, **overrides) -> LlamaConfig:
    """A ~0.5M-parameter Llama: 2 layers, hidden 128, 2 heads of 64."""
    params = dict(
        vocab_size=vocab_size, hidden_size=128, intermediate_size=384, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2, head_dim=64, max_position_embeddings=512,
        rms_norm_eps=1e-6, tie_word_embeddings=True, bos_token_id=0, eos_token_id=1, pad_token_id=2,
    )
    params.update(overrides)
    return LlamaConfig(**params)


def build_tiny_model(texts: Iterable[str], out_dir: str | Path | None = None, seed: int = 0, vocab_size: int = 1024):
    """Tokenizer + randomly initialised tiny Llama (saved to ``out_dir`` when given). Returns (model, tokenizer)."""
    import torch

    tokenizer = train_tokenizer(texts, vocab_size)
    torch.manual_seed(seed)
    config = tiny_llama_config(
        len(tokenizer),
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(config)
    if out_dir is not None:
        with checkpoint_folder.writing(out_dir) as folder:
            model.save_pretrained(folder)
            tokenizer.save_pretrained(folder)
    return model, tokenizer
