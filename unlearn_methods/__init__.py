"""Unlearning methods as Hugging Face Trainer losses, and the plain fine-tuning that builds target/retain models."""
