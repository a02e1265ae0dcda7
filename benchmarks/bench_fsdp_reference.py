"""KL's frozen reference under FSDP2 on N CPU processes: sharded as the model (what `unlearn run` does), kept whole
on every process (as before), or its values computed once before training (as NPO's): time and memory per process.

    PYTHONPATH=. python benchmarks/bench_fsdp_reference.py --model smollm2     # SmolLM2-135M, float32
    PYTHONPATH=. python benchmarks/bench_fsdp_reference.py --model tiny        # the tests' tiny Llama

*sharded* and *whole* run ``kl`` (full fine-tuning, ``--batch-size 1``, 64 tokens, forget01 of the tests' real-model
TOFU-schema set: 4 forget items, each paired with a retain item) under ``accelerate launch --config_file
examples/scaling/fsdp-8b.yaml --num_processes N`` through the tests' shim (``tests/fixtures/fsdp_on_cpu.py``;
``FSDP_ON_CPU_WHOLE_REFERENCE=1`` keeps the copy whole) with the memory probe of ``tests/fixtures/process_probes.py``.
Printed per process: the bytes of the reference it holds, its resident memory at its last optimiser step, its peak
resident memory, and the run's ``train_runtime`` and wall time; then how far the two runs' updates are apart.

*values once* is measured in this process: one pass of the model (no gradient) over the training rows' retain parts,
keeping what KL's loss takes from the reference at each answer position, the float32 log-probabilities over the
vocabulary (what NPO keeps is one number per row): the pass's time and the values' bytes, which every process would
hold (NPO's values are computed by the main process and given to every process with their rows).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FSDP_ON_CPU = REPO / "tests" / "fixtures" / "fsdp_on_cpu.py"
CONFIG = REPO / "examples" / "scaling" / "fsdp-8b.yaml"
GB = 1e9
MAX_LENGTH = 64


def launch(model: Path, data: Path, processes: int, epochs: int, out: Path, report: Path, whole: bool,
           threads: int) -> float:
    from fixtures.commands import launch as launch_unlearn

    env = {"PROBE_MEMORY": str(report), "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1",
           **({"FSDP_ON_CPU_WHOLE_REFERENCE": "1"} if whole else {})}
    command = ["unlearn", "run", "--method", "kl", "--full", "--model", str(model), "--dtype", "auto", "--data", "tofu",
               "--data-dir", str(data), "--forget", "forget01", "--retain", "retain99", "--batch-size", "1",
               "--epochs", str(epochs), "--max-length", str(MAX_LENGTH), "--lr", "1e-5", "--save-steps", "1000",
               "--quiet", "--out", str(out)]
    start = time.perf_counter()
    done = launch_unlearn(command, processes, env=env, timeout=None, script=str(FSDP_ON_CPU), config_file=str(CONFIG))
    if done.returncode:
        sys.exit(f"the {processes}-process run failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def values_once(model_dir: Path, data: Path) -> tuple[float, int, int, int]:
    """(seconds, bytes, rows, answer positions) of KL's reference values computed once over the training rows."""
    import torch
    import torch.nn.functional as F
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from unlearn_methods.forget_retain import ForgetRetainDataset, PairCollator, load_qa
    from unlearn_methods.idk import load_idk_answers
    from unlearn_methods.losses import answer_logits

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="auto").eval()
    rows = ForgetRetainDataset(load_qa("forget01", data_dir=str(data)), load_qa("retain99", data_dir=str(data)),
                               tokenizer, load_idk_answers(None), seed=0, max_length=MAX_LENGTH)
    collate = PairCollator(tokenizer.pad_token_id)
    kept: list[torch.Tensor] = []
    start = time.perf_counter()
    with torch.no_grad():
        for k in range(len(rows)):
            logits, labels = answer_logits(model, collate([rows[k]])["retain"])
            logp = F.log_softmax(logits[:, :-1].float(), -1)
            kept.append(logp[labels[:, 1:] != -100].clone())
    seconds = time.perf_counter() - start
    return seconds, sum(t.numel() * t.element_size() for t in kept), len(rows), sum(len(t) for t in kept)


def update_apart(base: Path, a: Path, b: Path) -> float:
    import torch
    from safetensors.torch import load_file

    w0, wa, wb = (load_file(str(d / "model.safetensors")) for d in (base, a, b))
    ua = {k: wa[k].double() - w0[k].double() for k in wa}
    diff = sum(((wb[k].double() - w0[k].double() - ua[k]) ** 2).sum() for k in ua)
    return float(torch.sqrt(diff / sum((u ** 2).sum() for u in ua.values())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="smollm2, tiny or a checkpoint folder")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="threads per process")
    parser.add_argument("--order", default="sharded,whole", help="the runs, in this order (under load: swap to see "
                        "how the load moves the times)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "tests"))
    from fixtures.real_model import write
    from unlearn_methods.pretrained import build_smollm2

    with tempfile.TemporaryDirectory(prefix="bench-reference-") as tmp:
        tmp = Path(tmp)
        if args.model == "smollm2":
            model = build_smollm2()
        elif args.model == "tiny":
            from unlearn_methods.scaffolding.tiny_model import build_tiny_model
            from unlearn_methods.scaffolding.tofu_corpus import tokenizer_texts

            model = tmp / "tiny"
            build_tiny_model(tokenizer_texts(0), model, seed=0)
        else:
            model = Path(args.model)
        data = write(tmp / "data")
        print(f"{args.model}, kl, {args.processes} processes, {args.epochs} epochs of 4 rows, --batch-size 1")
        print("reference | process | held (MB) | whole (MB) | RSS at the step (GB) | peak RSS (GB) | "
              "train_runtime (s) | wall (s)")
        for name in args.order.split(","):
            report = tmp / f"memory-{name}.jsonl"
            wall = launch(model, data, args.processes, args.epochs, tmp / name, report, name == "whole", args.threads)
            runtime = json.loads((tmp / name / "train_metrics.json").read_text())["metrics"]["train_runtime"]
            for r in sorted((json.loads(line) for line in report.read_text().splitlines()), key=lambda r: r["rank"]):
                print(f"{name} | {r['rank']} | {r['reference'] / 1e6:.1f} | {r['reference_whole'] / 1e6:.1f} | "
                      f"{r['rss'] / GB:.2f} | {r['peak_rss'] / GB:.2f} | {runtime:.1f} | {wall:.0f}")
        print(f"updates of the sharded and the whole-reference runs apart (relative L2): "
              f"{update_apart(model, tmp / 'whole', tmp / 'sharded'):.1e}")
        seconds, size, rows, positions = values_once(model, data)
        print(f"values once: {rows} rows, {positions} answer positions, {size / GB:.4f} GB of float32 "
              f"log-probabilities ({size / positions / 1e6:.3f} MB a position), one pass {seconds:.2f} s")


if __name__ == "__main__":
    main()
