"""Test and demo scaffolding: tiny models built from scratch and small synthetic datasets in the benchmarks' own
layouts, written by this project. No benchmark needs them; the demo (``unlearn demo``), ``unlearn run --data
demo``, the tests and the scripts in ``benchmarks/`` do.

- :mod:`.tiny_model`: a tiny Llama and a byte-level BPE tokenizer trained on a given corpus;
- :mod:`.tiny_vlm`: a tiny LLaVA (CLIP-style vision tower + the tiny Llama) and its processor;
- :mod:`.tofu_corpus`: fictitious authors in TOFU's schema, every TOFU config;
- :mod:`.tofu_formats_corpus`: the same authors in the TOFU data-transformation (ReLU) formats;
- :mod:`.clear_corpus`: fictitious people with PIL-drawn faces (:mod:`.faces`) in CLEAR's layout.
"""
