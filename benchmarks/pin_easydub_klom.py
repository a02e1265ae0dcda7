"""Measure EasyDUB's own KLoM (``easydub/eval.py``, ``klom_from_margins``) on a handful of margin ensembles and write
the per-sample values to tests/fixtures/upstream/easydub_klom.json, which
tests/unlearn_tasks/metrics/test_upstream_klom.py compares with ``klom_per_sample`` (run once; the test does not
need EasyDUB).

    git clone <EasyDUB-code repository>; python benchmarks/pin_easydub_klom.py --eval-py EasyDUB-code/easydub/eval.py

EasyDUB is not a PyPI package: its ``eval.py`` file is loaded by path (it imports numpy, torch and tqdm only).
The ensembles: random float32 margins of 8 unlearned and 8 oracle models over 12 samples (two scales, so some
samples overlap and some separate), plus edge cases: margins beyond +/-100 (clipped), both ensembles constant
(``lo >= hi``), the unlearned ensemble entirely on the top edge (dropped: KLoM 0), +/-inf margins (unlearned at -inf, oracle at +inf: the oracle is dropped, q = eps).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import torch

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "upstream" / "easydub_klom.json"


def ensembles() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    n_models, n_random = 8, 12
    centre = rng.normal(0.0, 3.0, n_random)  # per-sample margin level shared by both ensembles
    shift = np.linspace(0.0, 4.0, n_random)  # how far the oracle sits from the unlearned models: 0 .. 4
    unlearned = rng.normal(0.0, 1.0, (n_models, n_random)) + centre
    oracle = rng.normal(0.0, 1.5, (n_models, n_random)) + centre + shift
    edge_u = np.array([[150.0, -30.0, 5.0, 9.0, -np.inf]] * n_models)
    edge_o = np.array([[120.0, -200.0, 5.0, 1.0, np.inf]] * n_models)
    edge_u[:, 1] += np.arange(n_models)  # clipped-oracle sample with a spread unlearned ensemble
    edge_o[:, 3] += np.arange(n_models)  # oracle 1..8 below the constant unlearned 9 (= hi): nothing counted
    return (np.concatenate([unlearned, edge_u], 1).astype(np.float32),
            np.concatenate([oracle, edge_o], 1).astype(np.float32))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--eval-py", required=True, type=Path, help="EasyDUB's easydub/eval.py")
    args = parser.parse_args()
    spec = importlib.util.spec_from_file_location("easydub_eval", args.eval_py)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    unlearned, oracle = ensembles()
    values = module.klom_from_margins(torch.from_numpy(oracle), torch.from_numpy(unlearned))
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({
        "source": "EasyDUB-code easydub/eval.py klom_from_margins(oracle, unlearned) (defaults: clip +/-100, 20 bins, "
                  "eps 1e-5), file sha256 " + hashlib.sha256(args.eval_py.read_bytes()).hexdigest()
                  + "; produced by benchmarks/pin_easydub_klom.py",
        "dtype": "float32",
        "unlearned": [[float(v) for v in row] for row in unlearned],
        "oracle": [[float(v) for v in row] for row in oracle],
        "klom": [float(v) for v in values]}, indent=1) + "\n")  # +/-Infinity: Python's json reads it
    print(f"wrote {OUT}: {len(values)} samples")
    return 0


if __name__ == "__main__":
    sys.exit(main())
