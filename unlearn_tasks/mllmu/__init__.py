"""MLLMU-Bench (Liu et al., NAACL 2025): fictitious and real people asked the same facts with and without their
portrait, as lm-eval multimodal tasks (classification, fill in the blank, generation)."""
