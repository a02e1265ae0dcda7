"""A text classifier's class probabilities for generated texts: open-unlearning's ``classifier_prob`` metric, which
its TOFU / MUSE configs use as "gibberish" (``forget_Q_A_gibberish``, ``forget_gibberish``).

Any Hugging Face sequence-classification model: a local folder (no network) or a Hub id. Texts are tokenized in
batches with padding and truncation to ``max_length`` tokens, and the score of a text is ``softmax(logits)`` at
``class_id``, as open-unlearning computes it (its TOFU config: batch 32, ``max_length`` 32, ``class_id`` 0).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

#: open-unlearning's default classifier. Its class 0 is "clean" (classes 1-3: mild gibberish, noise, word salad), so
#: the default score is the probability that a text is *not* gibberish.
DEFAULT_CLASSIFIER = "madhurjindal/autonlp-Gibberish-Detector-492513457"


def chosen_classifier(option: bool | str) -> str | None:
    """The classifier a task's ``gibberish`` option names: OU's default for ``true``, the folder / Hub id given, or
    None when the metric is off."""
    if option is True:
        return DEFAULT_CLASSIFIER
    return option or None


def option_checks(option: object) -> list[tuple[bool, str]]:
    """The checks of a ``gibberish`` option (for :meth:`MetadataOptions.require`): a boolean or a non-empty string,
    and a local path (``/``, ``.``, ``~`` first) that exists."""
    from pathlib import Path

    missing = isinstance(option, str) and option[:1] in ("/", ".", "~") and not Path(option).expanduser().exists()
    return [(isinstance(option, (bool, str)) and option != "",
             "gibberish must be true (open-unlearning's classifier) or a classifier folder / Hub id"),
            (not missing, f"gibberish: the classifier folder {option!r} does not exist")]


class ClassifierError(ValueError):
    """The classifier cannot be loaded; the message says what to pass."""


@functools.lru_cache(maxsize=2)
def _load(classifier: str, device: str | None) -> tuple[Any, Any, str]:
    """The tokenizer, the model (evaluation mode, on ``device``: default the GPU if any) and the device."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    try:
        tokenizer = AutoTokenizer.from_pretrained(classifier)
        model = AutoModelForSequenceClassification.from_pretrained(classifier).to(device).eval()
    except (OSError, ValueError) as e:
        raise ClassifierError(
            f"Cannot load the text classifier {classifier!r} ({str(e).splitlines()[0]}). Pass a local folder with a "
            f"sequence-classification model and its tokenizer, or a Hub id reachable from here."
        ) from None
    return tokenizer, model, device


def class_probabilities(classifier: str, texts: Sequence[str], class_id: int = 0, max_length: int = 32,
                        batch_size: int = 32, device: str | None = None) -> list[float]:
    """``P(class_id | text)`` for each text under ``classifier`` (a folder or Hub id)."""
    import torch

    tokenizer, model, device = _load(classifier, device)
    n_classes = model.config.num_labels
    if not 0 <= class_id < n_classes:
        raise ClassifierError(f"class_id {class_id} is not a class of {classifier!r} ({n_classes} classes).")
    scores: list[float] = []
    for start in range(0, len(texts), batch_size):
        batch = list(texts[start : start + batch_size])
        inputs = tokenizer(batch, return_tensors="pt", padding=True, truncation=True, max_length=max_length)
        with torch.no_grad():
            logits = model(**{k: v.to(device) for k, v in inputs.items()}).logits
        scores += torch.softmax(logits.float(), dim=-1)[:, class_id].cpu().tolist()
    return scores


def pair_labels(classifier: str, pairs: Sequence[tuple[str, str]], batch_size: int = 30,
                device: str | None = None) -> list[str]:
    """The label (the model's ``id2label`` name of the top class) a sequence-pair classifier gives each
    ``(text, text_pair)``, e.g. an NLI model's ``entailment`` of (premise, hypothesis)."""
    import torch

    tokenizer, model, device = _load(classifier, device)
    labels: list[str] = []
    for start in range(0, len(pairs), batch_size):
        first, second = zip(*pairs[start : start + batch_size])
        inputs = tokenizer(list(first), list(second), return_tensors="pt", padding=True, truncation=True)
        with torch.no_grad():
            logits = model(**{k: v.to(device) for k, v in inputs.items()}).logits
        labels += [model.config.id2label[int(i)] for i in logits.argmax(dim=-1).cpu().tolist()]
    return labels
