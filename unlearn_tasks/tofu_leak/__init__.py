"""Leak@k on TOFU (arXiv 2511.04934): sampled answers to the forget questions, and the chance one of k leaks."""
