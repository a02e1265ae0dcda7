"""Benchmark logic for lm-eval-unlearning: data loading, prompts, per-sample scoring and corpus metrics."""
