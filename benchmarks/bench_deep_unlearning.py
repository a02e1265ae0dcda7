"""Timings of the deep-unlearning engine (pure Python + numpy, single process).

1. Eval-DU release: deductive closure + Success-DU / Recall / Accuracy for all 55 targets from one correctness
   vector (the upstream worked example), cold (closure built) and warm (closure cached).
2. Minimal-set search, ``--seeds`` seeds x 55 targets. When the measured per-seed cost says the full run would
   exceed ``--budget`` seconds, the first seeds are run and the total is extrapolated (and said so).
3. Closure time of generated knowledge bases of 100, 1k and 10k people, with the growth exponent
   ``log(t2/t1) / log(n2/n1)`` between consecutive sizes.

    python benchmarks/bench_deep_unlearning.py [--data ../shared/data/deep_unlearning] [--seeds 100] [--budget 300]

Without the release data (``--data`` absent), parts 1-2 run on a generated 100-person knowledge base.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

import numpy as np

from unlearn_tasks.deep_unlearning import (
    deductive_closure,
    find_minimal_set,
    generate_evaldu,
    load_evaldu,
    score_targets,
)
from unlearn_tasks.deep_unlearning.minimal_sets import canonical_order

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "deep_unlearning"


def timed(function, repeat: int) -> float:
    """Median wall time of ``function()`` over ``repeat`` runs, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_metrics(kb, relationships, biographies, repeat: int) -> None:
    def cold():
        kb._closure = None
        score_targets(relationships, biographies, kb)

    closure_only = timed(lambda: deductive_closure(kb.facts, kb.rules, kb.genders, kb.relation_conditions), repeat)
    cold_time = timed(cold, repeat)
    warm_time = timed(lambda: score_targets(relationships, biographies, kb), repeat)
    closure = kb.closure()
    print(f"[1] knowledge base {kb.name}: {kb.n_relationships} facts -> closure {closure.n_facts} facts, "
          f"{len(closure.instance_heads)} rule instances")
    print(f"    closure alone:                               {closure_only * 1e3:8.2f} ms")
    print(f"    closure + all metrics, {len(kb.targets)} targets (cold):    {cold_time * 1e3:8.2f} ms")
    print(f"    all metrics, {len(kb.targets)} targets (closure cached):    {warm_time * 1e3:8.2f} ms "
          f"({warm_time / len(kb.targets) * 1e3:.3f} ms per target)")


def bench_minimal_sets(kb, seeds: int, budget: float) -> None:
    closure = kb.closure()
    found: dict[int, set] = {t: set() for t in kb.targets}
    start = time.perf_counter()
    per_seed: list[float] = []
    for seed in range(seeds):
        seed_start = time.perf_counter()
        for target in kb.targets:
            found[target].add(find_minimal_set(closure, target, seed))
        per_seed.append(time.perf_counter() - seed_start)
        elapsed = time.perf_counter() - start
        if seed + 1 < seeds and elapsed / (seed + 1) * seeds > budget and seed >= 2:
            break
    done = len(per_seed)
    elapsed = time.perf_counter() - start
    mean_seed = elapsed / done
    print(f"[2] minimal-set search: {done} seeds x {len(kb.targets)} targets in {elapsed:.2f} s "
          f"({mean_seed:.3f} s per seed over all targets, {mean_seed / len(kb.targets) * 1e3:.2f} ms per seed-target)")
    if done < seeds:
        print(f"    EXTRAPOLATED (not run): {seeds} seeds x {len(kb.targets)} targets ~ {mean_seed * seeds:.1f} s "
              f"single process; stopped because it would exceed --budget {budget:.0f} s")
    sizes = [len(s) for sets in found.values() for s in sets]
    print(f"    distinct sets: {len(sizes)} ({min(sizes)}-{max(sizes)} facts, median {statistics.median(sizes):g})")
    if kb.minimal_sets:
        shipped = {t: set(canonical_order(s)) for t, s in kb.minimal_sets.items()}
        common = sum(len(found[t] & shipped[t]) for t in kb.targets if t in shipped)
        total = sum(len(shipped[t]) for t in kb.targets if t in shipped)
        extra = sum(len(found[t] - shipped.get(t, set())) for t in kb.targets)
        print(f"    vs shipped candidate sets: {common} of {total} rediscovered, {extra} new (minimal) sets found")


def bench_growth(sizes: list[int], repeat: int) -> None:
    print("[3] closure time vs generated knowledge-base size (seed 0)")
    rows = []
    for n in sizes:
        kb = generate_evaldu(n, seed=0, n_targets=0)
        runs = repeat if n <= 1000 else 1
        seconds = timed(lambda kb=kb: deductive_closure(kb.facts, kb.rules, kb.genders, kb.relation_conditions), runs)
        closure = deductive_closure(kb.facts, kb.rules, kb.genders, kb.relation_conditions)
        rows.append((n, len(kb.facts), closure.n_facts, len(closure.instance_heads), seconds))
        print(f"    {n:6d} people  {len(kb.facts):7d} facts  closure {closure.n_facts:7d} facts  "
              f"{len(closure.instance_heads):8d} instances  {seconds:8.3f} s")
    for (n1, f1, *_, t1), (n2, f2, *_, t2) in zip(rows, rows[1:]):
        exponent = math.log(t2 / t1) / math.log(f2 / f1)
        print(f"    {n1} -> {n2} people: time x{t2 / t1:.1f} for facts x{f2 / f1:.1f}  => growth ~ facts^{exponent:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--budget", type=float, default=300.0, help="seconds allowed for part 2 before extrapolating")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    if (args.data / "family_graph.json").is_file():
        kb = load_evaldu(args.data)
        example = json.loads((args.data / "example_for_evaluation.json").read_text())
        relationships, biographies = example["relationships_correct"], example["biographies_correct"]
    else:
        print(f"(no release data at {args.data}: using a generated 100-person knowledge base)")
        kb = generate_evaldu(100, seed=0)
        rng = np.random.default_rng(0)
        relationships = (rng.random(kb.n_relationships) < 0.5).tolist()
        biographies = (rng.random(kb.n_biographies) < 0.5).tolist()
    bench_metrics(kb, relationships, biographies, args.repeat)
    bench_minimal_sets(kb, args.seeds, args.budget)
    bench_growth(args.sizes, args.repeat)


if __name__ == "__main__":
    main()
