"""Measure ``waterfall`` 0.3.4's own ``Watermarker.verify()`` on a handful of token sequences and write the scores to
tests/fixtures/upstream/waterfall_0.3.4_verify.json, which tests/unlearn_tasks/waterdrum/test_upstream_pins.py
compares with this project's ``verify_tokens`` (run once; the test does not need waterfall installed).

    pip install --no-deps waterfall==0.3.4   # its imports used here need only numpy, scipy, torch, transformers
    python benchmarks/pin_waterfall.py

Texts are strings of space-separated token ids read by a minimal tokenizer, so the pins are about verification alone
(no real tokenizer involved). Vocabulary sizes 1000 (even), 1001 (odd) and 128256 (Llama-3, WaterDrum's).
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "upstream" / "waterfall_0.3.4_verify.json"
IDS = [0, 1, 19, 123456]


class IdTokenizer:
    """Reads "5 17 3" as token ids [5, 17, 3]; the attributes waterfall's Watermarker touches."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self.eos_token = "eos"
        self.pad_token = None
        self.deprecation_warnings: dict = {}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [int(t) for t in text.split()]


def texts_for(vocab: int, rng: np.random.Generator) -> list[list[int]]:
    texts = [[], [7], [3, 3], [vocab - 1, 0, vocab - 1, 0]]
    for length in (10, 40, 120):
        texts.append((np.minimum(rng.zipf(1.3, size=length) - 1, vocab - 1)).tolist())
    return texts


def main() -> int:
    from waterfall.WatermarkerBase import Watermarker

    assert version("waterfall") == "0.3.4", version("waterfall")
    rng = np.random.default_rng(2026)
    cases = []
    for vocab in (1000, 1001, 128256):
        top = vocab // 2 - 1 if vocab % 2 == 0 else vocab // 2
        keys = [1, 2, top, top + 1, 2 * top]
        texts = texts_for(vocab, rng)
        wm = Watermarker(tokenizer=IdTokenizer(vocab), id=0, k_p=1)
        scores = wm.verify([" ".join(map(str, t)) for t in texts], id=IDS, k_p=keys)  # [text, id, key]
        cases.append({"vocab_size": vocab, "ids": IDS, "k_p": keys, "tokens": texts,
                      "scores": np.asarray(scores, dtype=np.float64).tolist()})
        print(f"vocab {vocab}: {len(texts)} texts x {len(IDS)} ids x {len(keys)} keys", file=sys.stderr)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({
        "source": "waterfall 0.3.4 (PyPI), waterfall.WatermarkerBase.Watermarker(tokenizer=IdTokenizer(N), id=0, "
                  "k_p=1).verify(texts, id=ids, k_p=keys); produced by benchmarks/pin_waterfall.py",
        "cases": cases}, indent=1) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
