"""TOFU data-transformation formats (Joshi et al., whose dataset is called ReLU): MCQA, cloze, analogy, odd-one-out
and comprehension versions of TOFU's questions, as lm-eval tasks (``tofu_mcqa`` and friends, group
``tofu_formats``, whose name this package and its task folder ``task_yaml/tofu_formats`` share).

The data (Hugging Face ``Exploration-Lab/ReLU``, gated, CC BY-NC) is loaded at run time and never shipped. The
``relu_*`` ``--metadata`` keys keep the dataset's name.
"""
