"""RWKU's score: ROUGE-L recall of the answer against the probe's answer.

``release`` (the default) is the behaviour of the ``rouge`` package (``Rouge().get_scores``) that the release scores
with, restated here: no lower-casing, no punctuation removal, no stemming; a text is cut into sentences at every
``.`` (empty pieces dropped, whitespace inside a piece collapsed), sentences into words at single spaces; the
reference's and the answer's word *sets* count (repeated words count once); for each reference sentence one
longest common subsequence with each answer sentence is traced back (preferring to drop a reference word on ties,
as the package does), and the distinct words on those paths, united over the reference sentences, are the hits;
recall = hits / distinct reference words. ``rouge_score`` is Google's rouge-score ROUGE-L recall without stemmer
(lower-cased, non-alphanumerics dropped).
"""

from __future__ import annotations

import math

from unlearn_tasks.metrics.rouge import rouge_l_recall


def _sentences(text: str) -> list[str]:
    return [" ".join(piece.split()) for piece in text.split(".") if len(piece) > 0]


def _words(sentences: list[str]) -> list[str]:
    return [w for s in sentences for w in s.split(" ")]


def _lcs_words(ref: list[str], hyp: list[str]) -> set[str]:
    """The distinct words on the package's traced-back longest common subsequence of ``ref`` and ``hyp``."""
    n, m = len(ref), len(hyp)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            table[i][j] = table[i - 1][j - 1] + 1 if ref[i - 1] == hyp[j - 1] else max(table[i - 1][j], table[i][j - 1])
    words, i, j = set(), n, m
    while i > 0 and j > 0:
        if ref[i - 1] == hyp[j - 1]:
            words.add(ref[i - 1])
            i, j = i - 1, j - 1
        elif table[i - 1][j] > table[i][j - 1]:
            i -= 1
        else:
            j -= 1
    return words


def release_rouge_l_recall(reference: str, answer: str) -> float:
    """The ``rouge`` package's ROUGE-L (summary level) recall; NaN where it raises (a text with no sentence,
    e.g. ``"..."``)."""
    refs, hyps = _sentences(reference), _sentences(answer)
    if not refs or not hyps:
        return math.nan
    distinct_ref = len(set(_words(refs)))
    union: set[str] = set()
    hits = 0
    for ref_s in refs:
        before = len(union)
        for hyp_s in hyps:
            union |= _lcs_words(ref_s.split(" "), hyp_s.split(" "))
        hits += len(union) - before
    return hits / distinct_ref


def rouge_l(reference: str, answer: str, mode: str = "release") -> float:
    """ROUGE-L recall in ``mode`` (``release`` or ``rouge_score``)."""
    if mode == "release":
        return release_rouge_l_recall(reference, answer)
    return rouge_l_recall(reference, answer, use_stemmer=False)
