"""KLoM against EasyDUB's own ``easydub/eval.py``: per-sample values measured once with the upstream file
(benchmarks/pin_easydub_klom.py, written to tests/fixtures/upstream/easydub_klom.json) on 8 + 8 float32 margin
ensembles over 17 samples, clipping, constant ensembles, a dropped top edge and infinite margins included."""

import json
from pathlib import Path

import numpy as np

from unlearn_tasks.metrics.klom import klom_per_sample

PINS = json.loads((Path(__file__).resolve().parents[2] / "fixtures" / "upstream" / "easydub_klom.json").read_text())


def test_klom_equals_easydub_eval_py():
    unlearned = np.asarray(PINS["unlearned"], dtype=np.float32)
    oracle = np.asarray(PINS["oracle"], dtype=np.float32)
    upstream = np.asarray(PINS["klom"])
    assert unlearned.shape == oracle.shape == (8, 17) and np.isinf(unlearned).any()
    assert (upstream > 1).sum() >= 10 and (upstream == 0).sum() >= 3  # informative and edge-case values both
    ours = klom_per_sample(unlearned, oracle)  # defaults: easydub binning, KL(unlearned || oracle)
    np.testing.assert_allclose(ours, upstream, rtol=1e-12, atol=1e-12)
    # the other direction is a different number on most samples: the pins do fix the direction
    swapped = klom_per_sample(unlearned, oracle, direction="oracle-unlearned")
    assert (np.abs(swapped - upstream) > 1e-3).sum() >= 10
