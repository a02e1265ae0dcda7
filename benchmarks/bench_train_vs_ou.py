"""Unlearning runs side by side: our ``unlearn run`` against open-unlearning's own training entry point
(``src/train.py --config-name=unlearn.yaml``), each in its own process and environment, on the same model, data,
batches, seed and optimiser, a fixed number of optimiser steps.

    PYTHONPATH=. python benchmarks/bench_train_vs_ou.py --open-unlearning /path/to/open-unlearning \\
        [--ou-env own|ours] [--venv DIR] [--model smollm2 | DIR] [--data-dir DIR]
        [--methods graddiff npo simnpo idkdpo rmu undial] [--forget forget01 forget10] [--modes full lora]
        [--threads 1 2] [--pairs 3] [--steps 4] [--batch-size 4] [--lr 1e-5] [--ours-arg ARG]
        [--markdown FILE] [--json FILE]

Settings: every (method, forget split, full / LoRA, torch threads) of the lists given (default: the whole matrix,
which takes hours on a small machine). Each setting runs ``--pairs`` pairs, one side after the other (ours first in
odd pairs, open-unlearning first in even ones), so that background load falls on both. Per run: the wall time of the
process (start to exit: imports, model loading, the reference copy, training, saving), the time per optimiser step
(each side's own ``train_runtime`` over its steps), the time outside the steps (wall minus ``train_runtime``: the
start-up, ours' reference values computed once, the final save, the exit), and the peak resident memory of the process
tree (sampled every 50 ms); per pair, the relative L2 difference of the two runs' weight updates, ||dW_ours - dW_OU|| / ||dW_OU|| over
every parameter (for LoRA, the adapters merged into the weights). The markdown table gives each setting's medians,
the ours/OU ratios (median of the per-pair ratios) and the largest update difference, under a header with the date,
machine, load average and both sides' versions.

The same work on both sides:
- Model: SmolLM2-135M-Instruct (the project's GGUF fixture, converted once to a Hugging Face folder) in
  open-unlearning's chat setting: its ``configs/model/Llama-3.2-1B-Instruct.yaml`` (the model's chat template, system
  prompt "You are a helpful assistant.", ``date_string``) with the folder, float32 and the default attention
  overridden; ours ``--prompt-format chat`` with the same system prompt and template argument, ``--max-length 512``
  (its QA datasets' length) and its chat attention mask (our default).
- Data: a TOFU-schema folder (default: the project's demo corpus, forget01 = 6 and forget10 = 24 questions), read by
  open-unlearning's ``load_dataset("locuslab/TOFU", ...)`` from the run's working directory.
- Batches: the Trainer's sampler with seed 0 on both sides; open-unlearning draws each example's retain item (and
  IdkDPO's refusal) at random when the item is read, ours pairs them from the seed: its run starts from a launcher
  that gives its forget / retain dataset our pairing (the same work per item: one index looked up instead of drawn).
- Optimiser: AdamW (``adamw_torch``), ``--lr`` constant, no warm-up, no weight decay, batch ``--batch-size``, no
  gradient accumulation, float32; open-unlearning's evaluation during training off (``do_eval``, ``eval_on_start``).
  Its ``warmup_epochs`` is dropped (its ``load_trainer_args`` divides by the number of CUDA devices).
- Steps: ``--steps`` optimiser steps (open-unlearning ``max_steps``; ours the fraction of an epoch that makes them).
- Methods (open-unlearning's trainer config with its defaults; ours with the same hyperparameters): GradDiff, NPO,
  SimNPO, IdkDPO (its ``experiment=unlearn/tofu/idk``, trainer DPO; ours ``dpo`` with the same refusals), RMU (its
  layer 7; ours ``positions=open_unlearning``), UNDIAL (ours ``all_positions=true``): where ours follows the paper
  and open-unlearning differs, ours runs in open-unlearning's mode so that the weights can be compared.
- LoRA: open-unlearning's train.py has no LoRA option (its docs: register a model handler); the launcher registers
  one that wraps the loaded model in peft's LoRA with ours' settings (rank 8, alpha 16, no dropout, every linear
  layer, the seed set before the wrap), and peft is installed into its venv for it.

open-unlearning's environment (``--ou-env``, the venv code of ``bench_tofu_eval.py``): ``own`` (default) is its
README's install in a Python 3.11 venv of its own (its pins: torch 2.4.1, transformers 4.45.1, ...); ``--torch-from
VENV`` links torch 2.4.1 (and its CUDA libraries) from a venv that already holds that PyPI build instead of
downloading it again. ``ours`` runs its entry point on this environment's packages. The table names which.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

SYSTEM_PROMPT = "You are a helpful assistant."
DATE_STRING = "10 Apr 2025"
OU_CHAT_MODEL = "Llama-3.2-1B-Instruct"
#: peft for open-unlearning's LoRA runs (not in its requirements): the release of its transformers 4.45's time.
OU_PEFT = "peft==0.13.0"
#: Our LoRA settings (unlearn run's defaults), given to open-unlearning's LoRA model handler.
LORA = {"r": 8, "lora_alpha": 16, "lora_dropout": 0.0, "target_modules": "all-linear"}
PAIRING_ENV = "BENCH_TRAIN_PAIRING"


@dataclass(frozen=True)
class Method:
    """One method on both sides: open-unlearning's trainer config and experiment, our method and parameters."""

    label: str
    ou_trainer: str
    ou_experiment: str
    ours: str
    params: dict


METHODS = {m.label.lower(): m for m in (
    Method("GradDiff", "GradDiff", "unlearn/tofu/default", "graddiff", {"gamma": 1.0, "alpha": 1.0}),
    Method("NPO", "NPO", "unlearn/tofu/default", "npo", {"beta": 0.1, "alpha": 1.0, "gamma": 1.0}),
    Method("SimNPO", "SimNPO", "unlearn/tofu/default", "simnpo",
           {"delta": 0.0, "beta": 4.5, "alpha": 1.0, "gamma": 0.125}),
    Method("IdkDPO", "DPO", "unlearn/tofu/idk", "dpo", {"beta": 0.1, "alpha": 1.0, "gamma": 1.0}),
    Method("RMU", "RMU", "unlearn/tofu/default", "rmu",
           {"layer": 7, "steering_coeff": 2.0, "alpha": 1.0, "seed": 0, "positions": "open_unlearning"}),
    Method("UNDIAL", "UNDIAL", "unlearn/tofu/default", "undial",
           {"gamma": 1.0, "alpha": 0.0, "beta": 10.0, "all_positions": True}),
)}

#: open-unlearning's launcher: our pairing for its forget / retain dataset (and IdkDPO's refusals), a LoRA model
#: handler, then its train.py as its own __main__. transformers 5 returns a dict from apply_chat_template(tokenize=
#: True); its code expects 4.x's list (a no-op on its own pins).
OU_TRAIN_LAUNCHER = """import functools, json, os, runpy, sys
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
from transformers import AutoModelForCausalLM, PreTrainedTokenizerBase
_apply = PreTrainedTokenizerBase.apply_chat_template
@functools.wraps(_apply)
def apply_chat_template(self, *args, return_dict=False, **kwargs):
    return _apply(self, *args, return_dict=return_dict, **kwargs)
PreTrainedTokenizerBase.apply_chat_template = apply_chat_template
pairing = json.load(open(os.environ["BENCH_TRAIN_PAIRING"]))
import data.qa, data.unlearn, model
def getitem(self, idx):
    return {"forget": self.forget[idx], "retain": self.retain[pairing["retain"][idx]]}
data.unlearn.ForgetRetainDataset.__getitem__ = getitem
def item_with_idk(self, question):
    return self._process_sample(question=question, answer=pairing["idk"][question])
data.qa.QAwithIdkDataset.item_with_idk = item_with_idk
class BenchLoraCausalLM:
    @classmethod
    def from_pretrained(cls, **kwargs):
        import torch
        from peft import LoraConfig, get_peft_model
        loaded = AutoModelForCausalLM.from_pretrained(**kwargs)
        torch.manual_seed(pairing["seed"])
        return get_peft_model(loaded, LoraConfig(task_type="CAUSAL_LM", **pairing["lora"]))
model.MODEL_REGISTRY["BenchLoraCausalLM"] = BenchLoraCausalLM
runpy.run_path(script, run_name="__main__")
"""


# ------------------------------------------------------------------------------------------------- measuring
def tree_rss(pid: int) -> int:
    """Resident bytes of process ``pid`` and all its descendants (0 once it has gone)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        procs = [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


class RunFailed(RuntimeError):
    """A side's run exited with an error (the message ends with its output)."""


def timed_run(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, int, str]:
    """(wall seconds, peak resident bytes of its process tree, its output) of ``cmd``; :class:`RunFailed` with its
    output's end when it fails."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], tree_rss(proc.pid))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output, _ = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise RunFailed(f"{' '.join(cmd[:4])} ... failed (exit {proc.returncode}):\n{output[-3000:]}")
    return wall, peak[0], output


def relative_l2(ours: dict, theirs: dict, start: dict) -> float:
    """||(ours - start) - (theirs - start)|| / ||theirs - start|| over every tensor of the three state dicts (of the
    same names): the size of the difference of two runs' weight updates relative to open-unlearning's update."""
    diff = change = 0.0
    for name, first in start.items():
        diff += float(((ours[name].double() - theirs[name].double()) ** 2).sum())
        change += float(((theirs[name].double() - first.double()) ** 2).sum())
    if change == 0.0:
        return 0.0 if diff == 0.0 else math.inf
    return math.sqrt(diff / change)


def trained_weights(folder: Path, base: str) -> dict:
    """The float32 weights of a run's output: a full checkpoint, or a LoRA adapter merged into ``base``."""
    import torch
    from transformers import AutoModelForCausalLM

    if (folder / "adapter_config.json").is_file():
        from peft import PeftModel

        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        model = PeftModel.from_pretrained(model, str(folder)).merge_and_unload()
    else:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def train_seconds(trainer_log: list[dict]) -> float | None:
    """The Trainer's ``train_runtime`` from a log history (its last record that has one)."""
    runtimes = [r["train_runtime"] for r in trainer_log if "train_runtime" in r]
    return runtimes[-1] if runtimes else None


# ------------------------------------------------------------------------------------------------- the sides
def steps_per_epoch(n_examples: int, batch_size: int) -> int:
    return -(-n_examples // batch_size)


def our_epochs(steps: int, n_examples: int, batch_size: int) -> float:
    """The ``--epochs`` that makes the Trainer run ``steps`` optimiser steps (it rounds epochs x steps per epoch up)."""
    return steps / steps_per_epoch(n_examples, batch_size) - 1e-6


def pairing(forget: list[dict], retain: list[dict], idk_answers: list[str], seed: int) -> dict:
    """Our forget / retain dataset's pairing: per forget example (in order) its retain item, and per forget question
    its refusal."""
    from unlearn_methods.forget_retain import ForgetRetainDataset

    ds = ForgetRetainDataset(forget, retain, None, idk_answers, seed=seed)
    return {"retain": [ds.retain_order[k % len(retain)] for k in range(len(ds))],
            "idk": {f["question"]: ds.idk[i] for i, f in enumerate(forget)}, "seed": seed, "lora": LORA}


def our_command(method: Method, model: str, data_dir: Path, forget: str, retain: str, lora: bool, steps: int,
                n_examples: int, batch_size: int, lr: float, idk_file: Path, out: Path,
                checkpoints: bool = True) -> list[str]:
    """``unlearn run`` as a user runs it; without ``checkpoints``, no checkpoint before the end (open-unlearning's
    TOFU runs save none: its ``save_strategy: no``)."""
    cmd = [sys.executable, "-m", "unlearn_app", "run", "--method", method.ours, "--model", model, "--data", "tofu",
           "--data-dir", str(data_dir), "--forget", forget, "--retain", retain, "--lora" if lora else "--full",
           "--prompt-format", "chat", "--system-prompt", SYSTEM_PROMPT, "--chat-template-arg",
           f"date_string={DATE_STRING}", "--dtype", "float32", "--max-length", "512", "--seed", "0",
           "--batch-size", str(batch_size), "--epochs", repr(our_epochs(steps, n_examples, batch_size)),
           "--lr", repr(lr), "--idk-file", str(idk_file), "--out", str(out), "--overwrite", "--quiet"]
    if not checkpoints:
        cmd += ["--save-steps", str(steps + 1)]
    for key, value in method.params.items():
        cmd += ["--param", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
    return cmd


def ou_command(python: Path, launcher: Path, checkout: Path, method: Method, model: str, forget: str, retain: str,
               lora: bool, steps: int, batch_size: int, lr: float, out: Path) -> list[str]:
    a = "trainer.args."
    cmd = [str(python), str(launcher), str(checkout / "src" / "train.py"), "--config-name=unlearn.yaml",
           f"experiment={method.ou_experiment}", f"trainer={method.ou_trainer}", f"model={OU_CHAT_MODEL}",
           "~model.model_args.attn_implementation", "model.model_args.torch_dtype=float32",
           f"model.model_args.pretrained_model_name_or_path={model}",
           f"model.tokenizer_args.pretrained_model_name_or_path={model}",
           f"forget_split={forget}", f"retain_split={retain}",
           f"{a}per_device_train_batch_size={batch_size}", f"{a}gradient_accumulation_steps=1",
           f"{a}learning_rate={lr!r}", f"{a}weight_decay=0.0", f"~{a}warmup_epochs", f"+{a}max_steps={steps}",
           f"+{a}lr_scheduler_type=constant", f"{a}optim=adamw_torch", f"{a}bf16=false", f"{a}bf16_full_eval=false",
           f"{a}report_to=none", f"{a}do_eval=false", f"{a}eval_on_start=false", f"{a}eval_strategy=no",
           f"+{a}use_cpu=true", f"{a}logging_steps=1", f"task_name={out.name}", f"paths.output_dir={out}"]
    if method.ou_experiment.endswith("/default"):  # its idk experiment has no holdout split to set
        cmd.append(f"holdout_split={forget.replace('forget', 'holdout')}")
    if lora:
        cmd.append("+model.model_handler=BenchLoraCausalLM")
    return cmd


def ou_data_dir(data_dir: Path, cwd: Path, idk_answers: list[str]) -> None:
    """open-unlearning's inputs under its working directory ``cwd``: ``locuslab/TOFU`` (the local data) and
    ``data/idk.jsonl`` (the refusals, one per line)."""
    from bench_tofu_eval import ou_data

    ou_data(data_dir, cwd)
    (cwd / "data").mkdir(exist_ok=True)
    (cwd / "data" / "idk.jsonl").write_text("".join(a + "\n" for a in idk_answers))


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


# ------------------------------------------------------------------------------------------------- the table
def _median(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def setting_row(setting: dict, pairs: list[dict]) -> dict:
    """A setting's row: medians of each side's figures, medians of the per-pair ratios, the largest update
    difference."""
    row = dict(setting)
    for key in ("wall", "step", "outside", "rss"):
        for side in ("ours", "ou"):
            row[f"{side}_{key}"] = _median([p[side][key] for p in pairs])
        row[f"{key}_ratio"] = _median([p["ours"][key] / p["ou"][key] for p in pairs if p["ours"][key] and p["ou"][key]])
    l2 = [p["l2"] for p in pairs if p.get("l2") is not None]
    row["l2"] = max(l2) if l2 else None
    row["pairs"] = len(pairs)
    return row


def _num(x: float | None, spec: str) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def markdown(header: list[str], rows: list[dict]) -> str:
    """The table: one row per setting, under ``header`` (lines of date, machine, load, versions, settings)."""
    lines = [*header, "",
             "| method | forget | weights | threads | pairs | wall ours / OU (s) | ratio | s per step ours / OU | "
             "ratio | outside the steps ours / OU (s) | peak RSS ours / OU (MiB) | ratio | update diff (rel. L2) |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        mib = 2.0 ** 20
        rss = [None if r[k] is None else r[k] / mib for k in ("ours_rss", "ou_rss")]
        lines.append(
            f"| {r['method']} | {r['forget']} | {r['weights']} | {r['threads']} | {r['pairs']} | "
            f"{_num(r['ours_wall'], '.1f')} / {_num(r['ou_wall'], '.1f')} | {_num(r['wall_ratio'], '.2f')} | "
            f"{_num(r['ours_step'], '.2f')} / {_num(r['ou_step'], '.2f')} | {_num(r['step_ratio'], '.2f')} | "
            f"{_num(r['ours_outside'], '.1f')} / {_num(r['ou_outside'], '.1f')} | "
            f"{_num(rss[0], '.0f')} / {_num(rss[1], '.0f')} | {_num(r['rss_ratio'], '.2f')} | {_num(r['l2'], '.1e')} |")
    return "\n".join(lines) + "\n"


def our_versions() -> str:
    import importlib.metadata as md

    names = ("torch", "transformers", "peft", "accelerate")
    return f"Python {platform.python_version()}; " + ", ".join(f"{n} {md.version(n)}" for n in names)


def machine() -> str:
    cpu = "unknown CPU"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{platform.node()}, {cpu}, {os.cpu_count()} CPUs"


# ------------------------------------------------------------------------------------------------- the run
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--open-unlearning", required=True, metavar="DIR", help="A checkout of open-unlearning.")
    p.add_argument("--ou-env", choices=("own", "ours"), default="own", help="open-unlearning's environment (default "
                   "own: its requirements in a venv of their own).")
    p.add_argument("--venv", metavar="DIR", help="Keep open-unlearning's venv here and reuse it (default: a temporary "
                   "one; its own environment downloads several GB).")
    p.add_argument("--torch-from", metavar="VENV", help="With --ou-env own: link torch and its CUDA libraries from "
                   "this venv (one holding open-unlearning's torch pin) instead of downloading them.")
    p.add_argument("--ou-python", default="python3.11", help="The Python that makes the own venv (default python3.11).")
    p.add_argument("--model", default="smollm2", help="smollm2 (default: the SmolLM2-135M-Instruct fixture) or a "
                   "model folder with a chat template.")
    p.add_argument("--data-dir", metavar="DIR", help="A TOFU-schema folder (default: the project's demo corpus).")
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    p.add_argument("--forget", nargs="+", default=["forget01", "forget10"], choices=["forget01", "forget05", "forget10"])
    p.add_argument("--modes", nargs="+", default=["full", "lora"], choices=["full", "lora"])
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--steps", type=int, default=4, help="Optimiser steps per run (default 4).")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-5, help="Learning rate (default 1e-5, open-unlearning's TOFU one).")
    p.add_argument("--no-checkpoints", action="store_true", help="Ours without its checkpoint at the end of each "
                   "epoch (default: as a user runs it, checkpoints on; open-unlearning saves none).")
    p.add_argument("--ours-arg", action="append", default=[], metavar="ARG", help="An extra argument of ours' "
                   "`unlearn run` (repeatable), e.g. --ours-arg=--gradient-checkpointing; named in the table's header.")
    p.add_argument("--markdown", metavar="FILE", help="Also write the table here.")
    p.add_argument("--json", metavar="FILE", help="Also write every run's figures here.")
    return p


def bad_input(message: str) -> None:
    """Exit 2 with ``message`` as the one line on stderr."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


def check_checkout(checkout: Path) -> None:
    if not (checkout / "src" / "train.py").is_file() or not (checkout / "configs" / "unlearn.yaml").is_file():
        bad_input(f"--open-unlearning {checkout}: no src/train.py and configs/unlearn.yaml there; pass a checkout of "
                  "github.com/locuslab/open-unlearning.")


def link_torch(venv: Path, source: Path) -> None:
    """A new venv's site-packages gets links to ``source``'s torch, its CUDA libraries and torch's own requirements,
    so that installing open-unlearning's pins finds torch installed."""
    if (venv / "bin" / "python").exists():
        return
    site = next(source.glob("lib/python3*/site-packages"), None)
    if site is None or not any(site.glob("torch-*.dist-info")):
        bad_input(f"--torch-from {source}: no torch in its site-packages; give a venv that holds torch.")
    subprocess.run(["python3.11", "-m", "venv", str(venv)], check=True)
    target = next(venv.glob("lib/python3*/site-packages"))
    wanted = re.compile(r"^(torch|torchgen|functorch|nvidia|triton|sympy|isympy|mpmath|networkx|jinja2|markupsafe|"
                        r"fsspec|filelock|typing_extensions)([-_.].*)?$", re.IGNORECASE)
    for f in site.iterdir():
        if wanted.match(f.name) and not (target / f.name).exists():
            (target / f.name).symlink_to(f.resolve())


def ou_environment(args: argparse.Namespace, checkout: Path, work: Path) -> tuple[Path, str]:
    """(open-unlearning's Python, its versions line), the venv made once (with peft for the LoRA handler)."""
    from bench_tofu_eval import OU_VERSIONS, _env, _ou_versions, ou_venv

    venv = Path(args.venv).resolve() if args.venv else work / "venv"
    if args.ou_env == "own" and args.torch_from:
        link_torch(venv, Path(args.torch_from).expanduser().resolve())
    python = ou_venv(checkout, venv, args.ou_env, args.ou_python)
    peft_marker = venv / ".bench_train_peft"
    if "lora" in args.modes and not peft_marker.exists():
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", OU_PEFT]
        if subprocess.run(pip, env=_env(1, isolated=args.ou_env == "own")).returncode != 0:
            sys.exit(f"pip install {OU_PEFT} failed in {venv}.")
        peft_marker.write_text(OU_PEFT + "\n")
    if "peft" not in OU_VERSIONS:
        OU_VERSIONS.append("peft")
    return python, _ou_versions(python, args.ou_env)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    checkout = Path(args.open_unlearning).expanduser().resolve()
    check_checkout(checkout)
    from bench_tofu_eval import _env, _ou_model_view

    from unlearn_methods.forget_retain import load_qa
    from unlearn_methods.idk import IDK_ANSWERS
    from unlearn_methods.pretrained import resolve_model
    from unlearn_methods.scaffolding.tofu_corpus import write_corpus

    with tempfile.TemporaryDirectory(prefix="bench-train-") as tmp:
        work = Path(tmp)
        model = resolve_model(args.model)
        data_dir = Path(args.data_dir).resolve() if args.data_dir else write_corpus(work / "data")
        python, ou_versions = ou_environment(args, checkout, work)
        isolated = args.ou_env == "own"
        ou_model = _ou_model_view(model, work / "views") if isolated else model
        cwd = work / "ou-cwd"
        cwd.mkdir()
        idk = list(IDK_ANSWERS)
        ou_data_dir(data_dir, cwd, idk)
        idk_file = work / "idk.txt"
        idk_file.write_text("".join(a + "\n" for a in idk))
        launcher = cwd / "ou_train_launcher.py"
        launcher.write_text(OU_TRAIN_LAUNCHER)
        start_weights = trained_weights(Path(model), model)
        load_before = os.getloadavg()
        header = [f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {machine()}; load average before "
                  f"{load_before[0]:.2f} (1 min)",
                  f"ours: `unlearn run`, {our_versions()}",
                  f"open-unlearning ({checkout.name}, {_git_head(checkout)}), "
                  f"{'its own venv' if isolated else 'a venv on our packages'}: {ou_versions}",
                  f"model {Path(model).name}, float32, chat setting; {args.steps} optimiser steps, batch "
                  f"{args.batch_size}, lr {args.lr:g}, AdamW; data {'demo corpus' if not args.data_dir else data_dir}; ours "
                  f"{'without checkpoints' if args.no_checkpoints else 'with its checkpoint at each epoch end (the weights and AdamW state)'}"
                  f"{''.join(' ' + a for a in args.ours_arg)}"]
        print("\n".join(header), flush=True)
        rows, runs = [], []
        for method_key, forget, mode, threads in itertools.product(args.methods, args.forget, args.modes,
                                                                    args.threads):
            method, lora = METHODS[method_key], mode == "lora"
            retain = "retain" + str(100 - int(forget.removeprefix("forget")))
            forget_rows = load_qa(forget, data_dir=str(data_dir))
            pairing_file = work / f"pairing-{forget}.json"
            pairing_file.write_text(json.dumps(pairing(forget_rows, load_qa(retain, data_dir=str(data_dir)), idk, 0)))
            setting = {"method": method.label, "forget": forget, "weights": mode, "threads": threads}
            pairs: list[dict] = []
            for k in range(args.pairs):
                ours_cmd = our_command(method, model, data_dir, forget, retain, lora, args.steps, len(forget_rows),
                                       args.batch_size, args.lr, idk_file, work / "ours-out", not args.no_checkpoints)
                ours_cmd += args.ours_arg
                ou_cmd = ou_command(python, launcher, checkout, method, ou_model, forget, retain, lora, args.steps,
                                    args.batch_size, args.lr, work / "ou-out")
                ou_env = {**_env(threads, isolated), PAIRING_ENV: str(pairing_file)}
                try:
                    pair = run_pair(k, ours_cmd, _env(threads), ou_cmd, ou_env, cwd, work, model, start_weights)
                except RunFailed as e:
                    print(f"{method.label} {forget} {mode} {threads} thread(s): {e}", flush=True)
                    break
                pairs.append(pair)
                runs.append({**setting, "pair": k + 1, **pair})
                print(f"{method.label} {forget} {mode} {threads} thread(s), pair {k + 1}: {pair_line(pair)}", flush=True)
            if pairs:
                rows.append(setting_row(setting, pairs))
                write_outputs(args, header, rows, runs)
        header[0] += f", after {os.getloadavg()[0]:.2f}"
        print(write_outputs(args, header, rows, runs))
    return 0


def run_pair(k: int, ours_cmd: list[str], ours_env: dict, ou_cmd: list[str], ou_env: dict, cwd: Path, work: Path,
             model: str, start_weights: dict) -> dict:
    """Pair ``k`` (from 0): both sides, ours first when ``k`` is even; each side's figures and the update
    difference."""
    pair: dict = {}
    for folder in (work / "ours-out", work / "ou-out"):  # open-unlearning's run writes into a folder as it is:
        shutil.rmtree(folder, ignore_errors=True)       # an earlier LoRA run's adapter would be read as its result
    for side in (("ours", "ou") if k % 2 == 0 else ("ou", "ours")):
        if side == "ours":
            wall, rss, _ = timed_run(ours_cmd, ours_env)
            metrics = read_json(work / "ours-out" / "train_metrics.json")
            seconds = metrics.get("metrics", {}).get("train_runtime")
            steps = max((r.get("step", 0) for r in metrics.get("log_history", [])), default=None)
        else:
            wall, rss, _ = timed_run(ou_cmd, ou_env, cwd)
            state = read_json(work / "ou-out" / "trainer_state.json")
            seconds, steps = train_seconds(state.get("log_history", [])), state.get("global_step")
        pair[side] = {"wall": wall, "rss": rss, "steps": steps, "step": seconds / steps if seconds and steps else None,
                      "outside": wall - seconds if seconds else None}
    pair["l2"] = relative_l2(trained_weights(work / "ours-out", model), trained_weights(work / "ou-out", model),
                             start_weights)
    pair["load"] = os.getloadavg()[0]
    return pair


def pair_line(pair: dict) -> str:
    def side(name: str) -> str:
        s = pair[name]
        return (f"{s['wall']:.1f} s ({s['steps']} steps, {_num(s['step'], '.2f')} s/step, "
                f"{_num(s['outside'], '.1f')} s outside them, "
                f"{s['rss'] / 2 ** 20:.0f} MiB)")

    return (f"ours {side('ours')}, OU {side('ou')}; update difference {_num(pair['l2'], '.2e')}; "
            f"load {pair['load']:.2f}")


def write_outputs(args: argparse.Namespace, header: list[str], rows: list[dict], runs: list[dict]) -> str:
    """The table of the settings measured so far, written to --markdown / --json when given."""
    table = markdown(header, rows)
    if args.markdown:
        Path(args.markdown).write_text(table)
    if args.json:
        Path(args.json).write_text(json.dumps({"header": header, "rows": rows, "runs": runs}, indent=2))
    return table


def _git_head(checkout: Path) -> str:
    proc = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else "commit unknown"


if __name__ == "__main__":
    sys.exit(main())
