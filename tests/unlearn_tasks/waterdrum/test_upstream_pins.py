"""WaterDrum verification against ``waterfall`` 0.3.4's own ``Watermarker.verify()``: scores measured once with the
upstream package (benchmarks/pin_waterfall.py, written to tests/fixtures/upstream/) for 7 token sequences x 4 owner
ids x 5 keys (cos and sin, lowest and highest frequency) at vocabulary sizes 1000, 1001 and 128256."""

import json
from pathlib import Path

import numpy as np
import pytest

from unlearn_tasks.waterdrum.verify import verify_tokens

PINS = Path(__file__).resolve().parents[2] / "fixtures" / "upstream" / "waterfall_0.3.4_verify.json"
CASES = json.loads(PINS.read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[str(c["vocab_size"]) for c in CASES])
def test_verify_tokens_equals_waterfall_0_3_4(case):
    ours = verify_tokens(case["tokens"], case["ids"], case["k_p"], case["vocab_size"], workers=1, backend="numpy")
    upstream = np.asarray(case["scores"])
    assert ours.shape == upstream.shape == (7, 4, 5)
    assert np.abs(upstream).max() > 0.1  # the pins are not all zeros
    # waterfall accumulates in float32 (differences up to 3e-8 measured); ours in float64
    np.testing.assert_allclose(ours, upstream, atol=1e-6, rtol=0)
