"""CLEAR (Dontsov et al. 2025): character unlearning in text and images, as lm-eval multimodal tasks."""
