"""TOFU (Maini et al. 2024): data, per-item scoring, corpus metrics, reference logs and the lm-eval task class."""
