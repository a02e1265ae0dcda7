"""Leak@k on WMDP's questions as lm-eval ships them (this package's definition: the Leak-k release has no WMDP
Leak@k): sampled answers to each multiple-choice question, and the chance one of k picks the right option."""
