"""KLoM: the vectorised implementation vs a straightforward per-sample loop (the releases' way: np.digitize and a
histogram per sample), same numbers, at EasyDUB's scale.

    PYTHONPATH=. python benchmarks/bench_klom.py [--models 100] [--samples 50000] [--loop-samples 2000]

The loop is timed on the first ``--loop-samples`` samples and its full-size time is extrapolated per sample (the
output says so); the vectorised one runs on all samples. Both are compared on the samples the loop computed.
Peak memory: Python-side allocations (tracemalloc, numpy included) of the vectorised call beyond its inputs,
and the process's peak resident size.
"""

from __future__ import annotations

import argparse
import math
import resource
import time
import tracemalloc

import numpy as np

from unlearn_tasks.metrics.klom import klom_per_sample


def loop_klom(u: np.ndarray, o: np.ndarray) -> np.ndarray:
    """EasyDUB's per-sample computation, one sample at a time."""
    out = np.empty(u.shape[1])
    for j in range(u.shape[1]):
        a, b = np.clip(u[:, j], -100, 100), np.clip(o[:, j], -100, 100)
        lo, hi = min(a.min(), b.min()), max(a.max(), b.max())
        if lo >= hi:
            hi = lo + 1
        edges = np.linspace(lo, hi, 21)
        ia, ib = np.digitize(a, edges), np.digitize(b, edges)
        ca = np.array([np.sum(ia == k) for k in range(1, 21)], dtype=float)
        cb = np.array([np.sum(ib == k) for k in range(1, 21)], dtype=float)
        p = ca / ca.sum() if ca.sum() else np.zeros(20)
        q = cb / cb.sum() if cb.sum() else np.zeros(20)
        q = np.where(p > 0, np.maximum(q, 1e-5), q)
        out[j] = sum(p[k] * math.log(p[k] / q[k]) for k in range(20) if p[k] > 0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=100, help="models per ensemble (default 100 + 100)")
    parser.add_argument("--samples", type=int, default=50_000)
    parser.add_argument("--loop-samples", type=int, default=2_000, help="samples the loop is timed on")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    u = (rng.normal(0, 3, (args.models, args.samples)) + rng.normal(0, 1, args.samples)).astype(args.dtype)
    o = rng.normal(0, 3, (args.models, args.samples)).astype(args.dtype)
    print(f"ensembles: {args.models} unlearned + {args.models} oracle models x {args.samples} samples, "
          f"{args.dtype} ({(u.nbytes + o.nbytes) / 2**20:.0f} MiB of margins)")

    times = []
    for _ in range(3):
        start = time.perf_counter()
        fast = klom_per_sample(u, o)
        times.append(time.perf_counter() - start)
    t_fast = sorted(times)[1]
    tracemalloc.start()  # a separate run: tracing slows allocations down
    klom_per_sample(u, o)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    n_loop = min(args.loop_samples, args.samples)
    start = time.perf_counter()
    slow = loop_klom(u[:, :n_loop], o[:, :n_loop])
    t_loop_part = time.perf_counter() - start
    t_loop = t_loop_part / n_loop * args.samples
    diff = float(np.max(np.abs(fast[:n_loop] - slow)))
    assert diff <= 1e-9, f"vectorised and loop differ by {diff}"

    extrapolated = "" if n_loop == args.samples else (
        f" (timed on {n_loop} samples: {t_loop_part:.2f} s, extrapolated per sample to {args.samples})")
    print(f"per-sample loop:   {t_loop:9.2f} s{extrapolated}")
    print(f"vectorised:        {t_fast:9.2f} s (all {args.samples} samples, chunks of 512, median of 3 runs)")
    print(f"speed-up:          {t_loop / t_fast:9.1f}x")
    print(f"max |difference|:  {diff:9.2e} over {n_loop} samples")
    print(f"peak memory:       {peak / 2**20:9.1f} MiB allocated by the vectorised call (tracemalloc), "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB process peak RSS")
    print(f"result:            P95 KLoM {np.percentile(fast, 95):.4f}, mean {fast.mean():.4f}")


if __name__ == "__main__":
    main()
