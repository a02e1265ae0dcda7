"""MUSE (Shi et al., "MUSE: Machine Unlearning Six-Way Evaluation"): News and Books as lm-eval tasks."""
