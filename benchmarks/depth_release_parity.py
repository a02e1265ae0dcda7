"""``unlearn depth`` against the UDS release (gnueaj/unlearning-depth-score) run side by side on the same three
models and questions: per question, the full model's score, every layer's stage-1 and stage-2 scores and the UDS.

The release is used from a ``git archive`` export (its ``compute_uds.py`` and ``uds/`` are imported, never copied):

    git clone https://github.com/gnueaj/unlearning-depth-score /tmp/uds-git
    mkdir /tmp/uds && git -C /tmp/uds-git archive HEAD | tar -x -C /tmp/uds
    PYTHONPATH=. python benchmarks/depth_release_parity.py --release /tmp/uds --n 8

The models: SmolLM2-135M-Instruct (float32, the ``smollm2_dir`` test fixture) as the full model; a retain and an
unlearned stand-in made from it by deterministic perturbations of its decoder layers (seeded Gaussian noise, 3 % and
1 % of each weight's standard deviation). The questions: the first ``--n`` of the release's own annotated forget10
file, with the release's defaults (entity span, patching the entity positions, tau 0.05, every layer, batch 1).
Exit 1 when any value differs by more than ``--tol``."""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path


def perturbed(model, scale: float, seed: int):
    """``model`` with each decoder-layer weight moved by ``scale`` times its standard deviation (seeded noise)."""
    import torch

    other = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in other.model.layers.parameters():
            p.add_(scale * p.std() * torch.randn(p.shape, generator=gen))
    return other.eval()


def ours(target, retain, unlearned, tokenizer, rows: list[dict], tau: float = 0.05) -> list[dict]:
    """Per question: full score, stage scores and UDS from this package, on the release's prompt layout."""
    from unlearn_methods.depth_items import build_items
    from unlearn_methods.patching import depth_scores
    from unlearn_tasks.metrics.depth import example_depth

    notes = {r["question"].strip(): r for r in rows}
    items, skipped = build_items(tokenizer, rows, "release", notes)
    full, s1, s2 = depth_scores(target, retain, unlearned, items, tokenizer.pad_token_id, batch_size=1)
    return [{"question": it.question, "full": f, "s1": a, "s2": b, "uds": example_depth(f, a, b, tau).uds}
            for it, f, a, b in zip(items, full, s1, s2)]


def release(release_dir: str | Path, target, retain, unlearned, tokenizer, rows: list[dict],
            tau: float = 0.05) -> list[dict]:
    """The same from the release's own batched stage-1/stage-2 function (its defaults, batch 1)."""
    sys.path.insert(0, str(Path(release_dir).resolve()))
    try:
        import compute_uds
    finally:
        sys.path.pop(0)
    n_layers = len(target.model.layers)
    data = [{"idx": i, **r} for i, r in enumerate(rows)]
    results, *_ = compute_uds._run_s1_s2_side_by_side_logprob_batch(
        retain, unlearned, target, tokenizer, data, list(range(n_layers)), delta_threshold=tau, batch_size=1)
    return [{"question": r["question"], "full": r["full_score"], "s1": r["s1_scores"], "s2": r["s2_scores"],
             "uds": r["uds"]} for r in results]


def max_difference(a: list[dict], b: list[dict]) -> float:
    """The largest absolute difference between two runs' values (inf when they scored different questions or one
    has a UDS where the other has none)."""
    if [r["question"] for r in a] != [r["question"] for r in b]:
        return float("inf")
    worst = 0.0
    for x, y in zip(a, b):
        if (x["uds"] is None) != (y["uds"] is None):
            return float("inf")
        pairs = [(x["full"], y["full"]), *zip(x["s1"], y["s1"]), *zip(x["s2"], y["s2"])]
        if x["uds"] is not None:
            pairs.append((x["uds"], y["uds"]))
        worst = max(worst, *(abs(p - q) for p, q in pairs))
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", required=True, help="Folder of a `git archive` export of the UDS release.")
    parser.add_argument("--n", type=int, default=8, help="Questions (the first N of the release's annotations).")
    parser.add_argument("--tol", type=float, default=1e-5)
    parser.add_argument("--out", help="Also write both runs' values as JSON here.")
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from unlearn_methods.pretrained import build_smollm2

    torch.manual_seed(0)
    folder = build_smollm2()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    if tokenizer.pad_token is None:  # as the release's loader does
        tokenizer.pad_token = tokenizer.eos_token
    target = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    retain, unlearned = perturbed(target, 0.03, 1), perturbed(target, 0.01, 2)
    rows = json.loads((Path(args.release) / "tofu_data" / "forget10_filtered.json").read_text())[: args.n]
    rows = [{k: r[k] for k in ("question", "answer", "prefix", "entity")} for r in rows]
    started = time.perf_counter()
    a = ours(target, retain, unlearned, tokenizer, rows)
    ours_s = time.perf_counter() - started
    started = time.perf_counter()
    b = release(args.release, target, retain, unlearned, tokenizer, rows)
    release_s = time.perf_counter() - started
    worst = max_difference(a, b)
    mean = lambda runs: sum(r["uds"] for r in runs if r["uds"] is not None) / max(1, sum(r["uds"] is not None for r in runs))  # noqa: E731
    print(f"{len(a)} questions x {len(target.model.layers)} layers; UDS ours {mean(a):.6f}, release {mean(b):.6f}; "
          f"largest difference {worst:.2e}; ours {ours_s:.1f} s, release {release_s:.1f} s (it also generates "
          "30 tokens per question with two models, for its log)")
    if args.out:
        Path(args.out).write_text(json.dumps({"ours": a, "release": b}, indent=1))
    return 0 if worst <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
