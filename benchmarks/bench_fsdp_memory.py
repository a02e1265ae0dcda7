"""Memory per process of `unlearn run` under FSDP2 with 1, 2 and 3 CPU processes, next to (weights + gradients +
AdamW states) / N.

    PYTHONPATH=. python benchmarks/bench_fsdp_memory.py --model smollm2            # SmolLM2-135M, float32
    PYTHONPATH=. python benchmarks/bench_fsdp_memory.py --model llama1b            # Llama-3.2-1B's shape, bfloat16
    PYTHONPATH=. python benchmarks/bench_fsdp_memory.py --loading every            # every process keeps its own load

Each N runs GradDiff (full fine-tuning, ``--batch-size 1``, 64 tokens) under ``accelerate launch --config_file
examples/scaling/fsdp-8b.yaml --num_processes N`` (one process: the same launch, which accelerate runs unsharded),
CPU processes over gloo through the tests' shim (``tests/fixtures/fsdp_on_cpu.py``: accelerate enables FSDP only for
GPU process groups) with the memory probe of ``tests/fixtures/process_probes.py``. Printed per process:

- **held**: the weights, gradients and AdamW states the process holds at its last optimiser step (its shards under
  FSDP), the part of a GPU's memory that sharding divides by N, next to the expected (weights + gradients + AdamW)/N;
- **RSS at the step**: its resident memory then (those, the Python and torch libraries, activations, buffers);
- **RSS once loaded**: its private memory and the pages of the checkpoint's files it maps (the page cache, shared
  by the processes) when ``from_pretrained`` returns;
- **peak RSS** of each phase of the run and overall: *load* (``from_pretrained``: transformers reads the whole model
  on every process), *prepare* (the data, then the Trainer sharding the model), *steps*, *checkpoint* (the Trainer's
  periodic checkpoint: the last step's), *save* (the state gathered and written whole).

``--loading`` compares accelerate's two ways of sharding a loaded model: ``rank0`` (the configuration's
``fsdp_cpu_ram_efficient_loading: true``: every process but the first drops the model it loaded, its shards are
broadcast from process 0's) and ``every`` (``false``: each process shards its own copy; run from a copy of the
configuration with that one line changed).

``--model llama1b`` builds a randomly initialised model of Llama-3.2-1B's shape (16 layers, hidden 2048, MLP 8192,
32 heads, 8 key-value heads, vocabulary 128,256, tied embeddings; 1.24 billion parameters) in bfloat16, with
SmolLM2's tokenizer (its ids fall inside the vocabulary); ``--model DIR`` any local checkpoint. The data: the tests'
real-model TOFU-schema set (4 forget items, 4 retain items).
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
PHASES = ("load", "prepare", "steps", "checkpoint", "save")  # tests/fixtures/process_probes.py


def llama_1b(folder: Path) -> Path:
    """A random model of Llama-3.2-1B's shape in bfloat16, with SmolLM2's tokenizer, saved in ``folder``."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from unlearn_methods.pretrained import build_smollm2

    if (folder / "model.safetensors").is_file():
        return folder
    tokenizer = AutoTokenizer.from_pretrained(build_smollm2())
    config = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                         num_attention_heads=32, num_key_value_heads=8, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, dtype="bfloat16")
    torch.manual_seed(0)
    with torch.device("cpu"):
        model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def parameters_and_bytes(model: Path) -> tuple[int, int]:
    """(parameter count, bytes per parameter) of the checkpoint, read from its config on the meta device."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model)
    with torch.device("meta"):
        built = AutoModelForCausalLM.from_config(config, dtype=getattr(config, "dtype", None) or torch.float32)
    first = next(built.parameters())
    return sum(p.numel() for p in built.parameters()), first.element_size()


def config_file(loading: str, folder: Path) -> Path:
    """The documented configuration (``rank0``), or a copy of it in ``folder`` with ``fsdp_cpu_ram_efficient_loading:
    false`` (``every``)."""
    if loading == "rank0":
        return CONFIG
    text = CONFIG.read_text()
    line = "fsdp_cpu_ram_efficient_loading: true"
    if line not in text:
        sys.exit(f"{CONFIG} has no line '{line}'")
    copy = folder / "fsdp-every-process-loads.yaml"
    copy.write_text(text.replace(line, "fsdp_cpu_ram_efficient_loading: false"))
    return copy


def run(model: Path, dtype: str, data: Path, processes: int, out: Path, report: Path, threads: int,
        config: Path, mmap_threshold: int | None) -> float:
    from fixtures.commands import launch

    env = {"PROBE_MEMORY": str(report), "OMP_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1",
           **({"MALLOC_MMAP_THRESHOLD_": str(mmap_threshold)} if mmap_threshold else {})}
    command = ["unlearn", "run", "--method", "graddiff", "--full", "--model", str(model), "--dtype", dtype, "--data",
               "tofu", "--data-dir", str(data), "--forget", "forget01", "--retain", "retain99", "--batch-size", "1",
               "--epochs", "1", "--max-length", "64", "--lr", "1e-5", "--save-steps", "1000", "--quiet", "--out", str(out)]
    start = time.perf_counter()
    done = launch(command, processes, env=env, timeout=None, script=str(FSDP_ON_CPU), config_file=str(config))
    if done.returncode:
        sys.exit(f"the {processes}-process run failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2", help="smollm2, llama1b or a checkpoint folder")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--threads", type=int, default=1, help="threads per process")
    parser.add_argument("--malloc-mmap-threshold", type=int, metavar="BYTES",
                        help="glibc's MALLOC_MMAP_THRESHOLD_ for the processes (131072: every freed buffer larger "
                             "than that goes back to the system at once; default: glibc's own, which keeps them)")
    parser.add_argument("--dtype", choices=["float32", "bfloat16"],
                        help="load the model in this dtype (default: smollm2 float32, llama1b bfloat16); one other "
                             "than the checkpoint's is converted, so read, by every process")
    parser.add_argument("--keep", type=Path, help="a folder to keep the llama1b model in between runs (built once)")
    parser.add_argument("--loading", choices=["rank0", "every"], default="rank0",
                        help="rank0: the configuration's fsdp_cpu_ram_efficient_loading: true; every: false")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO / "tests"))
    from fixtures.real_model import write
    from unlearn_methods.pretrained import build_smollm2

    with tempfile.TemporaryDirectory(prefix="bench-fsdp-") as tmp:
        tmp = Path(tmp)
        if args.model == "smollm2":
            model, dtype = build_smollm2(), "float32"
        elif args.model == "llama1b":
            model, dtype = llama_1b(args.keep or tmp / "llama1b"), "bfloat16"
        else:
            model, dtype = Path(args.model), "auto"
        dtype = args.dtype or dtype
        params, size = parameters_and_bytes(model)
        if dtype in ("float32", "bfloat16"):
            size = 4 if dtype == "float32" else 2
        data = write(tmp / "data")
        config = config_file(args.loading, tmp)
        state = params * size * 4  # weights, gradients, AdamW's two moments, all in the weights' dtype
        print(f"{args.model}: {params / 1e9:.3f} billion parameters, {dtype}; weights + gradients + AdamW states "
              f"{state / GB:.2f} GB; weights {params * size / GB:.2f} GB; loading: {args.loading}; MALLOC_MMAP_THRESHOLD_: "
              f"{args.malloc_mmap_threshold or 'glibc default'}")
        print("processes | process | held (GB) | (w+g+AdamW)/N (GB) | RSS at the step (GB) | RSS once loaded: "
              f"private / file-mapped (GB) | peak RSS: {' / '.join(PHASES)} (GB) | peak RSS (GB) | wall (s)")
        for n in args.processes:
            report = tmp / f"memory-{n}.jsonl"
            wall = run(model, dtype, data, n, tmp / f"out-{n}", report, args.threads, config, args.malloc_mmap_threshold)
            rows = sorted((json.loads(line) for line in report.read_text().splitlines()), key=lambda r: r["rank"])
            for r in rows:
                held = r["weights"] + r["grads"] + r["optimizer"]
                phases = " / ".join(f"{r['phases'][p] / GB:.2f}" if p in r["phases"] else "-" for p in PHASES)
                print(f"{n} | {r['rank']} | {held / GB:.3f} (w {r['weights'] / GB:.3f}, g {r['grads'] / GB:.3f}, "
                      f"AdamW {r['optimizer'] / GB:.3f}) | {state / n / GB:.3f} | {r['rss'] / GB:.2f} | "
                      f"{r['loaded_anon'] / GB:.2f} / {r['loaded_file'] / GB:.2f} | {phases} | "
                      f"{r['peak_rss'] / GB:.2f} | {wall:.0f}")
                sampled = ", ".join(f"{p} {r['sampled'][p][0] / GB:.2f} / {r['sampled'][p][1] / GB:.2f}"
                                    for p in PHASES if p in r["sampled"])
                print(f"    process {r['rank']}, largest private / file-mapped RSS sampled (GB): {sampled}")


if __name__ == "__main__":
    main()
