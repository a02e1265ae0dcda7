"""Mixed precision under FSDP2: how far bf16 runs on N CPU processes are from one process, against how far bf16 is
from float32 on one process (docs/scaling.md, "Mixed precision").

    PYTHONPATH=. python benchmarks/bench_fsdp_mixed_precision.py            # GradDiff and NPO, 2 processes
    PYTHONPATH=. python benchmarks/bench_fsdp_mixed_precision.py --processes 3 --methods npo

Every run trains the tests' tiny Llama (float32) on the demo corpus, forget01, 2 epochs, ``--lr 1e-3``, at the same
global batch and micro-batches: N FSDP processes of ``--batch-size`` rows against one process with ``--batch-size B
--grad-accum N``. All go through ``accelerate launch --config_file examples/scaling/fsdp-8b.yaml`` and the tests'
shim (``tests/fixtures/fsdp_on_cpu.py``; one process: the same launch, which accelerate runs unsharded):

- one process, ``--mixed_precision no`` (float32) and ``bf16`` (float32 weights under bf16 autocast);
- N processes, ``--mixed_precision bf16``: accelerate's ``MixedPrecisionPolicy`` (bf16 parameters and gradient
  reduction, float32 shards that AdamW updates), and the same with a float32 reduction
  (``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``, which accelerate's config file cannot set:
  the shim's ``FSDP_ON_CPU_REDUCE_FLOAT32=1``);
- N processes, ``--mixed_precision no``: the float32 baseline of sharding itself.

Printed per method: the relative L2 difference of the weight updates of each pair (``tests/fixtures/weights.py``)
and the largest relative difference of the logged losses.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FSDP_ON_CPU = str(REPO / "tests" / "fixtures" / "fsdp_on_cpu.py")
CONFIG = str(REPO / "examples" / "scaling" / "fsdp-8b.yaml")
METHODS = {"graddiff": ["--method", "graddiff", "--full"], "npo": ["--method", "npo", "--full"]}

#: (label, processes: 1 or N, --mixed_precision, float32 reduction)
RUNS = [("one, float32", 1, "no", False), ("one, bf16", 1, "bf16", False), ("N, float32", "N", "no", False),
        ("N, bf16", "N", "bf16", False), ("N, bf16, float32 reduction", "N", "bf16", True)]
#: the pairs printed, (label, run, against)
PAIRS = [("one process: bf16 autocast against float32", "one, bf16", "one, float32"),
         ("N processes, float32, against one process in float32", "N, float32", "one, float32"),
         ("N processes, bf16 parameters and reduction, against one process in bf16", "N, bf16", "one, bf16"),
         ("the same against one process in float32", "N, bf16", "one, float32"),
         ("N processes, bf16, float32 reduction against bf16 reduction", "N, bf16, float32 reduction", "N, bf16"),
         ("N processes, bf16, float32 reduction against one process in bf16", "N, bf16, float32 reduction",
          "one, bf16")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="N, the FSDP processes")
    parser.add_argument("--batch-size", type=int, default=2, help="rows per process and micro-batch")
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "tests"))
    from fixtures.commands import launch
    from fixtures.weights import logged_losses, update_difference
    from unlearn_methods.scaffolding.tiny_model import build_tiny_model
    from unlearn_methods.scaffolding.tofu_corpus import tokenizer_texts, write_corpus

    n = args.processes
    with tempfile.TemporaryDirectory(prefix="bench-fsdp-mp-") as tmp:
        tmp = Path(tmp)
        model, data = tmp / "tiny", write_corpus(tmp / "data")
        build_tiny_model(tokenizer_texts(0), model, seed=0)
        common = ["--model", str(model), "--dtype", "float32", "--data", "demo", "--data-dir", str(data), "--forget",
                  "forget01", "--retain", "retain99", "--lr", "1e-3", "--epochs", "2", "--quiet"]
        for label, processes, precision, reduce32 in RUNS:
            rows = ["--batch-size", str(args.batch_size)] + (["--grad-accum", str(n)] if processes == 1 else [])
            program = ["unlearn"]
            for i, method in enumerate(args.methods):
                program += [*(["---"] if i else []), "run", *METHODS[method], *common, *rows, "--out",
                            str(tmp / label / method)]
            done = launch(program, processes=n if processes == "N" else 1, config_file=CONFIG, script=FSDP_ON_CPU,
                          mixed_precision=precision, env={"FSDP_ON_CPU_REDUCE_FLOAT32": "1"} if reduce32 else {},
                          timeout=1800)
            if done.returncode:
                sys.exit(f"the run '{label}' failed:\n{done.stderr[-3000:]}")
        print(f"tiny Llama, float32 weights, forget01, 2 epochs, --lr 1e-3; N = {n} processes x {args.batch_size} "
              f"rows, one process {args.batch_size} rows x {n} micro-batches")
        print("runs compared | method | relative difference of the updates | largest relative difference of the "
              "logged losses | update norm")
        for label, run, against in PAIRS:
            for method in args.methods:
                one, other = tmp / against / method, tmp / run / method
                difference, update = update_difference(model, one, other)
                losses = max(abs(a - b) / max(abs(a), 1e-12)
                             for a, b in zip(logged_losses(one), logged_losses(other), strict=True))
                print(f"{label.replace('N ', f'{n} ')} | {method} | {difference:.2e} | {losses:.1e} | {update:.3f}")


if __name__ == "__main__":
    main()
