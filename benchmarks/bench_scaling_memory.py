"""Memory per GPU of full fine-tuning sharded over N GPUs (FSDP FULL_SHARD or DeepSpeed ZeRO-3), computed from a
model's parameter count (the Scaling up page's table).

    PYTHONPATH=. python benchmarks/bench_scaling_memory.py [--gpus 8] [--batch-size 4] [--tokens 512]

The model is Llama-3.1-8B's shape (vocabulary 128,256, hidden 4096, 32 layers, 8 key-value heads, MLP 14,336,
untied embeddings), built on torch's meta device: no weights are read or allocated. Bytes per parameter: bf16
weights, gradients and AdamW states (FSDP with ``--dtype bfloat16``): 2 + 2 + 4; bf16 weights and gradients with
fp32 master weights and AdamW states (DeepSpeed bf16, FSDP with fp32 weights): 2 + 2 + 12; the frozen reference copy
of the methods that have one (not sharded): 2.
"""

from __future__ import annotations

import argparse

import torch
from transformers import LlamaConfig, LlamaForCausalLM

GB = 1e9


def llama_8b() -> LlamaConfig:
    return LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                       num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=4, help="rows per GPU and step")
    parser.add_argument("--tokens", type=int, default=512, help="tokens per row")
    args = parser.parse_args()
    config = llama_8b()
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    params = sum(p.numel() for p in model.parameters())
    layer = sum(p.numel() for p in model.model.layers[0].parameters())
    embed = model.model.embed_tokens.weight.numel()
    print(f"parameters: {params / 1e9:.2f} billion (one decoder layer {layer / 1e6:.0f} M, embeddings {embed / 1e6:.0f} M)")
    rows = [("bf16 weights, gradients, AdamW states (2 + 2 + 4 B)", 8, True),
            ("bf16 weights and gradients, fp32 master + AdamW (2 + 2 + 12 B)", 16, True),
            ("frozen bf16 reference copy, not sharded (2 B)", 2, False)]
    for name, per_param, sharded in rows:
        whole = params * per_param / GB
        print(f"{name}: whole {whole:.1f} GB, per GPU {whole / args.gpus if sharded else whole:.1f} GB")
    print(f"gathered during the forward pass (bf16): one layer {layer * 2 / GB:.2f} GB, embeddings {embed * 2 / GB:.2f} GB")
    logits = args.batch_size * args.tokens * config.vocab_size * 4 / GB
    print(f"float32 logits of one forward pass at batch {args.batch_size} x {args.tokens} tokens: {logits:.2f} GB")


if __name__ == "__main__":
    main()
