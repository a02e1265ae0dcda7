"""TOFU data-transformation formats (ReLU, Joshi et al.): MCQA, cloze, analogy, odd-one-out and comprehension
versions of TOFU's questions, as lm-eval tasks (``tofu_mcqa`` and friends).

The data (Hugging Face ``Exploration-Lab/ReLU``, gated, CC BY-NC) is loaded at run time and never shipped.
"""
