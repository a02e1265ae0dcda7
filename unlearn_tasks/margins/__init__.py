"""Margins of language models and classifiers for ensemble metrics (KLoM, U-LiRA): the ``margins_*`` lm-eval
tasks and the readers that stack per-model margins into ``[n_models, n_samples]`` ensembles."""
