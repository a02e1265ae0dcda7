"""Leak@k on MUSE (arXiv 2511.04934): sampled answers to the forget KnowMem questions and sampled continuations of
the forget VerbMem passages, and the chance one of k leaks."""
