"""BLUR (Hu et al., 2025): unlearning benchmarks robust to forget-retain overlap, scored against the base model's
own answers."""
