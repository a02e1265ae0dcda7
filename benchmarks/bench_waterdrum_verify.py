"""Throughput of WaterDrum/Waterfall verification: batched engine vs the straightforward per-text loop.

Texts are synthetic token streams (Zipf-distributed ids, like word frequencies; ~93 distinct tokens per
200-token text) over the Llama-3 base vocabulary N = 128000, scored under 20 owner ids with k_p = 1.

* straightforward: text by text, id by id, ``RandomState([id, prev]).permutation(N)`` per bigram with an
  LRU cache of 512 permutations (256 MB), mean cos. Slow, so it runs on the first ``--naive-texts`` texts
  and its rate is reported per text.
* engine: ``verify_tokens`` on the whole batch: one permutation per distinct (id, previous token) of the
  batch, on all cores, with the compiled kernel when numba is installed (``--backend numpy`` without).
  Its per-text cost falls as the batch grows (more shared previous tokens), so the batch size is part of
  the result.

Scores of the overlapping texts must agree (|diff| <= 1e-9). Run:
``PYTHONPATH=. python benchmarks/bench_waterdrum_verify.py [--texts 200] [--naive-texts 3]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from unlearn_tasks.waterdrum import mt19937  # noqa: E402
from unlearn_tasks.waterdrum.permutation import default_workers  # noqa: E402
from unlearn_tasks.waterdrum.reference import ReferenceVerifier  # noqa: E402
from unlearn_tasks.waterdrum.verify import counted_bigrams, verify_tokens  # noqa: E402


def synthetic_texts(n_texts: int, length: int, vocab: int, zipf: float, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [np.minimum(rng.zipf(zipf, size=length) - 1, vocab - 1) for _ in range(n_texts)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--texts", type=int, default=200, help="batch size for the engine")
    ap.add_argument("--naive-texts", type=int, default=3, help="texts for the straightforward loop")
    ap.add_argument("--ids", type=int, default=20)
    ap.add_argument("--length", type=int, default=200)
    ap.add_argument("--vocab", type=int, default=128000)
    ap.add_argument("--zipf", type=float, default=1.1)
    ap.add_argument("--workers", type=int, default=None, help="engine processes (default: all cores)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", choices=["auto", "numba", "numpy"], default="auto", help="engine kernel")
    args = ap.parse_args(argv)
    if args.naive_texts > args.texts:
        ap.error("--naive-texts must not exceed --texts")

    texts = synthetic_texts(args.texts, args.length, args.vocab, args.zipf, args.seed)
    ids = list(range(args.ids))
    workers = args.workers or default_workers()
    backend = args.backend if args.backend != "auto" else ("numba" if mt19937.AVAILABLE else "numpy")
    prev, _, _ = counted_bigrams(texts, args.vocab)
    per_text_prevs = np.mean([len(np.unique(t[:-1])) for t in texts])
    print(f"{args.texts} texts x {args.length} tokens, {args.ids} ids, N={args.vocab}, zipf {args.zipf}, "
          f"{workers} worker(s) of {os.cpu_count()} cores, engine kernel: {backend}")
    print(f"distinct previous tokens: {per_text_prevs:.1f} per text, {len(np.unique(prev))} in the batch")

    naive = ReferenceVerifier(args.vocab, cache_size=512)
    t0 = time.perf_counter()
    ref = naive.verify(texts[: args.naive_texts], ids, [1], method="sum")
    t_naive = time.perf_counter() - t0
    naive_rate = args.naive_texts / t_naive

    verify_tokens(texts[:1], ids[:1], 1, args.vocab, workers=1, backend=args.backend)  # JIT warm-up
    t0 = time.perf_counter()
    fast = verify_tokens(texts, ids, 1, args.vocab, workers=workers, backend=args.backend)
    t_fast = time.perf_counter() - t0
    fast_rate = args.texts / t_fast

    diff = float(np.abs(fast[: args.naive_texts] - ref).max())
    assert diff <= 1e-9, f"scores differ by {diff}"
    n_perms = args.ids * len(np.unique(prev))
    print(f"straightforward: {args.naive_texts} texts in {t_naive:.2f} s -> {naive_rate:.3f} texts/s "
          f"({naive_rate * args.ids:.2f} text-ids/s, {naive.built} permutations, "
          f"{t_naive / max(naive.built, 1) * 1e3:.2f} ms per permutation)")
    print(f"engine:          {args.texts} texts in {t_fast:.2f} s -> {fast_rate:.3f} texts/s "
          f"({fast_rate * args.ids:.2f} text-ids/s, {n_perms} permutations, "
          f"{t_fast / n_perms * 1e3 * workers:.2f} ms per permutation per core)")
    print(f"speed-up: {fast_rate / naive_rate:.1f}x   (identical scores: max |diff| = {diff:.1e})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
