"""``unlearn depth`` equals the UDS release's own code (gnueaj/unlearning-depth-score) on the same models and
questions: every layer's stage-1 and stage-2 scores and each question's UDS. Runs where ``UDS_RELEASE_DIR`` names a
``git archive`` export of the release (see benchmarks/depth_release_parity.py, which does the same on SmolLM2);
skipped otherwise. Here: tiny Llamas and the demo corpus's forget01 questions, annotated with the last word of
each answer as the entity (the release's schema)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fixtures.scripts import load_script

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "depth_release_parity.py"
RELEASE = os.environ.get("UDS_RELEASE_DIR")

pytestmark = pytest.mark.skipif(not (RELEASE and (Path(RELEASE) / "compute_uds.py").is_file()),
                                reason="UDS_RELEASE_DIR does not name an export of gnueaj/unlearning-depth-score")


def test_tiny_models_equal_the_release(tiny_model_dir, demo_data_dir):
    import json

    from transformers import AutoModelForCausalLM, AutoTokenizer

    bench = load_script(SCRIPT)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    target = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    rows = [json.loads(line) for line in (demo_data_dir / "forget01.json").read_text().splitlines() if line.strip()]
    annotated = []
    for r in rows:
        prefix, _, entity = r["answer"].rstrip(".").rpartition(" ")
        annotated.append({"question": r["question"], "answer": r["answer"], "prefix": prefix, "entity": entity})
    retain, unlearned = bench.perturbed(target, 0.3, 1), bench.perturbed(target, 0.1, 2)
    ours = bench.ours(target, retain, unlearned, tokenizer, annotated)
    theirs = bench.release(RELEASE, target, retain, unlearned, tokenizer, annotated)
    assert len(ours) == len(rows) and any(r["uds"] is not None for r in ours)
    assert bench.max_difference(ours, theirs) <= 1e-5
