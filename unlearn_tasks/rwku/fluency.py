"""RWKU's fluency measure (``eval_fluency.py``): the weighted n-gram entropy of an answer to an instruction.

Per answer: the entropy (bits) of its word bigram and trigram frequencies, weighted 2/3 and 4/3, averaged; the
metric is the mean over answers. Words are NLTK's ``word_tokenize`` (Punkt sentences, then NLTK's Treebank-style
word tokenizer); without the Punkt data installed (``nltk.download("punkt_tab")``) sentences are split after
``.``, ``!`` or ``?`` followed by whitespace instead (:func:`words` says which).
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np

NS, WEIGHTS = (2, 3), (2 / 3, 4 / 3)


def _punkt_available() -> bool:
    import nltk

    for resource in ("tokenizers/punkt_tab/english/", "tokenizers/punkt"):
        try:
            nltk.data.find(resource)
            return True
        except LookupError:
            continue
    return False


def words(text: str) -> tuple[list[str], bool]:
    """The answer's words, and whether NLTK's own ``word_tokenize`` (with Punkt) gave them."""
    import nltk
    from nltk.tokenize.destructive import NLTKWordTokenizer

    if _punkt_available():
        return nltk.word_tokenize(text), True
    tokenizer = NLTKWordTokenizer()
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", text) if s]
    return [w for s in sentences for w in tokenizer.tokenize(s)], False


def ngram_entropy(tokens: list[str]) -> float:
    """Mean of the weighted bigram and trigram entropies (bits) of ``tokens`` (0 for too few tokens)."""
    values = []
    for n, weight in zip(NS, WEIGHTS, strict=True):
        counts = np.array(list(Counter(zip(*(tokens[i:] for i in range(n)))).values()), dtype=np.float64)
        freqs = counts / counts.sum() if counts.size else counts
        values.append(float(np.sum(-freqs * np.log(freqs) / np.log(2))) * weight)
    return float(np.mean(values))
