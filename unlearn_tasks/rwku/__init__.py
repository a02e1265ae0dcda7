"""RWKU (Jin et al., NeurIPS 2024 Datasets and Benchmarks): real-world knowledge unlearning of famous people."""
