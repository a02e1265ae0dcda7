"""A full TOFU evaluation side by side: ours (`tofu_forget10`, every metric, lm-eval's hf backend) vs
open-unlearning's own TOFU evaluator, on the same model folder, data, batch size and machine, in one run.

    PYTHONPATH=. python benchmarks/bench_tofu_eval.py --open-unlearning /path/to/open-unlearning \\
        [--ou-env ours|own] [--venv DIR] [--model DIR --retain-model DIR | --model smollm2 | --model tiny]
        [--data-dir DIR] [--finetune-epochs N] [--batch-sizes 8 16 32] [--threads 1 2] [--pairs 3] [--chat]
        [--json FILE] [--markdown FILE]

Settings: every (batch size, torch threads) of `--batch-sizes` x `--threads`, both sides at the same one. Each
setting runs `--pairs` pairs, both sides one after the other (ours first in odd pairs, open-unlearning first in
even ones), so background load falls on both; the script prints every pair's parts (start-up, generation,
likelihoods, metrics, total), the min and median of each side and of the ours/OU ratio, the tokens generated per
item on each side and how many generated texts are identical, every metric pair, and the load average before and
after each run. At the end, one markdown table (printed; `--markdown FILE` writes it): a row per setting with ours
min/median, OU min/median, the ours/OU ratio (min over min, and the median of the per-pair ratios), whether every
metric pair was equal (within `--tolerance`, in every pair) and how many generated texts were identical (the pair
with fewest), headed by the run's own date, machine, CPU model and load average before and after, and
open-unlearning's environment with its versions. ``--model smollm2`` is the real-model fixture
(SmolLM2-135M-Instruct), used as its own reference (`mia_reference` then compares a model with itself and is
left out of "equal metrics").

Data: a TOFU-schema folder (default: the demo corpus, 24 forget10 questions). Models (default): the tiny demo Llama
with random weights (target seed 0, retain seed 1; every greedy answer runs to the 200-token limit, the worst case
for generation), or, with --finetune-epochs N, the same two fine-tuned on `full` / `retain90` as `unlearn demo`
does (answers of real length, non-zero ROUGE). `unlearn demo --workdir W` output works too: --model W/models/target
--retain-model W/models/retain --data-dir W/data.

open-unlearning (a checkout of github.com/locuslab/open-unlearning), in one of two environments (`--ou-env`; the
output states which, with its Python and package versions; `--venv DIR` keeps the venv and reuses it):
- `ours` (the default): a venv with --system-site-packages, so it runs on this environment's torch / transformers /
  datasets (torch 2.13, transformers 5.24, datasets 5.2 here), the checkout installed with --no-deps plus what its
  evaluator imports (hydra-core, hydra_colorlog, deepspeed, imported at start-up by its trainer package);
- `own`: as its README installs it, on its own pins: a Python 3.11 venv (`--ou-python`) without system site
  packages, `pip install -r requirements.txt` of the checkout (at d3d7cf9: torch 2.4.1, the PyPI build with its
  CUDA libraries, run on the CPU; transformers 4.45.1, datasets 3.0.1, numpy 2.2.3, accelerate 0.34.2, deepspeed
  0.15.4, built from source here, bitsandbytes 0.44.1, huggingface-hub 0.29.1, ...), then the checkout with its
  `lm-eval` extra (lm-eval 0.4.8: its evaluators package imports lm_eval at start-up; its README's
  `.[lm_eval]`, spelt as its setup.py does, which the venv's pip 23.2 needs). Left out: flash-attn 2.6.3
  (its README's second step), a CUDA extension that cannot be built on a machine without a GPU and that its CPU
  runs do not use (its TOFU model configs' flash attention is overridden only with --chat; phi-1_5's config sets
  none). Its runs get no PYTHONPATH and no user site packages. Its transformers 4.45 reads a model folder saved by
  transformers 5 only through a view in 4.x's keys (`_ou_model_view`). Known difference on the tiny random model
  (2026-11-27): `forget_gibberish` is not equal there, because half its forget generations are empty texts, which
  the classifier sees as all padding with an all-zero attention mask, and transformers 4.45 and 5.24 score such a
  fully masked input differently (0.5507 vs 0.1751 for the tiny classifier); every non-empty text scores the same,
  and every other metric is equal. The install downloads about 3 GB once (about 5 minutes here, deepspeed's
  build included).
In either, the script runs `src/eval.py experiment=eval/tofu/default
model=phi-1_5` (TOFU's `Question: ...\\nAnswer: ` template, no chat template) with hydra overrides for the model
folder, the CPU, the batch size and its MIA metrics. Its `load_dataset("locuslab/TOFU", name=...)` reads the same
local data: the run's working directory holds `locuslab/TOFU/` (the data files and a README whose `configs:` name
each TOFU config). Before the timed runs, once per invocation (at the first setting), it evaluates the retain model
for Forget Quality's and PrivLeak's reference (forget truth ratios, Min-K% AUROC), not timed; that TOFU_EVAL.json
is the reference of both sides in every setting.
Our side runs with `answer_scoring: tofu` (open-unlearning's token boundary) so that equal numbers are visible.

`--chat`: open-unlearning's instruct setting instead (its `configs/model/Llama-3.2-1B-Instruct.yaml`: the model's
chat template, system prompt "You are a helpful assistant.", `date_string` "10 Apr 2025"; run as `model=
Llama-3.2-1B-Instruct` with the model folder, float32 and default attention overridden), and ours with lm-eval's
own flags: `--apply_chat_template --system_instruction "You are a helpful assistant."`, the date string as the
`chat_template_args` model argument. Its evaluator calls `apply_chat_template(tokenize=True)` expecting a list of
ids (transformers 4.45, its pin); on transformers 5 that returns a dict, so its run starts from a launcher that
gives it the list back (nothing else changed). Generated texts are matched on the prompt as it decodes it (special
tokens skipped).
Without --open-unlearning that side is skipped (our reference then comes from our own run of the retain model).

Besides its default metrics, open-unlearning runs its four likelihood MIAs and exact memorization, GradNorm and the
reference MIA (against the retain model); ours runs with `mia_gradnorm: true`, and its reference MIA reads the
retain model's per-item losses from open-unlearning's reference log (its `mia_loss`).

Each side runs as its own process, timed from start to exit. Parts: generation (our `generate_until`; their
`*_ROUGE` metrics), answer scoring (our `unlearn_answer_logprobs` and `unlearn_answer_gradnorm`: probability, truth
ratio, MIA; their other metrics, from the timestamps of their log), and the rest (imports, model and data loading,
task building).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

#: Our metric -> open-unlearning's TOFU_EVAL.json key (agg_value).
METRIC_PAIRS = [
    ("forget_prob", "forget_Q_A_Prob"), ("forget_truth_ratio", "forget_truth_ratio"),
    ("forget_rougeL_recall", "forget_Q_A_ROUGE"), ("forget_quality", "forget_quality"),
    ("retain_prob", "retain_Q_A_Prob"), ("retain_truth_ratio", "retain_Truth_Ratio"),
    ("retain_rougeL_recall", "retain_Q_A_ROUGE"),
    ("ra_prob", "ra_Q_A_Prob_normalised"), ("ra_truth_ratio", "ra_Truth_Ratio"), ("ra_rougeL_recall", "ra_Q_A_ROUGE"),
    ("wf_prob", "wf_Q_A_Prob_normalised"), ("wf_truth_ratio", "wf_Truth_Ratio"), ("wf_rougeL_recall", "wf_Q_A_ROUGE"),
    ("model_utility", "model_utility"),
    ("mia_loss_auc", "mia_loss"), ("mia_zlib_auc", "mia_zlib"), ("mia_min_k_auc", "mia_min_k"),
    ("mia_min_k_plus_plus_auc", "mia_min_k_plus_plus"), ("privleak", "privleak"),
    ("extraction_strength", "extraction_strength"), ("exact_memorization", "exact_memorization"),
    ("mia_reference_auc", "mia_reference"), ("mia_gradnorm_auc", "mia_gradnorm"),
    ("forget_gibberish", "forget_Q_A_gibberish"),
]
OU_MIA = ["mia_loss", "mia_zlib", "mia_min_k_plus_plus", "mia_min_k"]
#: open-unlearning's metrics that are off by default, run on the target (mia_reference against the retain model).
OU_EXTRA = ["exact_memorization", "mia_gradnorm", "mia_reference", "forget_Q_A_gibberish"]
#: open-unlearning's metrics that need its generations (left out with --likelihood-only).
OU_GENERATION = ["forget_Q_A_ROUGE", "model_utility", "forget_Q_A_gibberish"]
OU_NOT_REFERENCE = ["forget_quality", "forget_Q_A_Prob", "forget_Q_A_ROUGE", "model_utility", "privleak",
                    "extraction_strength"]
#: open-unlearning's metrics computed from other metrics' values (no forward pass of their own).
OU_FROM_OTHERS = {"forget_truth_ratio", "forget_quality", "retain_Truth_Ratio", "ra_Truth_Ratio", "wf_Truth_Ratio",
                  "ra_Q_A_Prob_normalised", "wf_Q_A_Prob_normalised", "model_utility", "privleak"}
OU_REQUIREMENTS = ["hydra-core==1.3.*", "hydra_colorlog==1.2.0", "deepspeed"]
#: open-unlearning's instruct setting (its configs/model/Llama-3.2-1B-Instruct.yaml template_args), for --chat.
OU_CHAT_MODEL_CONFIG = "Llama-3.2-1B-Instruct"
SYSTEM_PROMPT = "You are a helpful assistant."
DATE_STRING = "10 Apr 2025"
#: Runs open-unlearning's script with transformers' ``apply_chat_template(tokenize=True)`` returning a list of ids,
#: as the transformers its requirements pin (4.45) does; transformers 5 returns a dict by default.
OU_LAUNCHER = """import functools, os, runpy, sys
from transformers import PreTrainedTokenizerBase
_apply = PreTrainedTokenizerBase.apply_chat_template
@functools.wraps(_apply)
def apply_chat_template(self, *args, return_dict=False, **kwargs):
    return _apply(self, *args, return_dict=return_dict, **kwargs)
PreTrainedTokenizerBase.apply_chat_template = apply_chat_template
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
runpy.run_path(script, run_name="__main__")
"""
LOG_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[[^]]*\]\[[A-Z]+\] - (.*)$")


#: open-unlearning's two environments (--ou-env): how its venv is made and what goes into it.
OU_ENVS = {
    "ours": "a venv with --system-site-packages on this environment's torch / transformers / datasets, "
            "open-unlearning installed --no-deps plus " + ", ".join(OU_REQUIREMENTS),
    "own": "a Python 3.11 venv without system site packages: `pip install -r requirements.txt` of the checkout "
           "(its pins), then the checkout with its lm-eval extra, as its README installs it; flash-attn left out "
           "(a CUDA build, not buildable on a CPU machine; its CPU runs use the default attention)",
}
#: The distributions whose versions the run states for open-unlearning's environment.
OU_VERSIONS = ["torch", "transformers", "datasets", "numpy", "accelerate", "deepspeed", "lm-eval", "hydra-core",
               "scipy", "scikit-learn", "rouge-score"]
VENV_MARKER = ".bench_tofu_eval_ready"


def _env(threads: int, isolated: bool = False) -> dict[str, str]:
    """A side's environment: offline, and the given torch thread count for both sides (more threads than free cores
    make every forward pass wait on the busiest core: on the shared 2-core machine, 2 threads made generation 20x
    slower). ``isolated`` (open-unlearning's own venv): without PYTHONPATH and the user's site packages."""
    n = str(threads)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error",
           "OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n}
    if isolated:
        env.pop("PYTHONPATH", None)
        env["PYTHONNOUSERSITE"] = "1"
    return env


# --------------------------------------------------------------------------------------------------- our side
def _timed_methods(timings: dict[str, float], counts: dict[str, int], generations: list) -> None:
    """Time lm-eval's model calls, its whole ``evaluate`` and the model's loading; keep each generation."""
    import lm_eval.evaluator
    from lm_eval.api.model import LM
    from lm_eval.models.huggingface import HFLM

    from harness_ext.request_types import ANSWER_GRADNORM, ANSWER_LOGPROBS, install_request_types

    install_request_types()
    for cls, name in ((HFLM, "generate_until"), (HFLM, "loglikelihood"), (LM, ANSWER_LOGPROBS), (LM, ANSWER_GRADNORM)):
        original = getattr(cls, name)

        @functools.wraps(original)
        def wrapper(self, requests, *args, _original=original, _name=name, **kwargs):
            start = time.perf_counter()
            try:
                out = _original(self, requests, *args, **kwargs)
            finally:
                timings[_name] += time.perf_counter() - start
                counts[_name] += len(requests)
            if _name == "generate_until":
                generations.extend((r.args[0], text) for r, text in zip(requests, out, strict=True))
            return out

        setattr(cls, name, wrapper)
    model_generate = HFLM._model_generate  # (after install_request_types: the routing of harness_ext.generation)

    @functools.wraps(model_generate)
    def counted(self, context, *args, **kwargs):
        out = model_generate(self, context, *args, **kwargs)
        eos = self.model.generation_config.eos_token_id
        eos = set(eos if isinstance(eos, list) else [eos]) | {self.tokenizer.eos_token_id}
        for row in out[:, context.shape[1]:].tolist():
            ends = [i for i, tok in enumerate(row) if tok in eos]
            counts["generated_tokens"] += ends[0] + 1 if ends else len(row)  # up to and including EOS
        return out

    HFLM._model_generate = counted
    for owner, name, key in ((lm_eval.evaluator, "evaluate", "evaluate"), (HFLM, "__init__", "model_load")):
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args, _original=original, _key=key, **kwargs):
            start = time.perf_counter()
            try:
                return _original(*args, **kwargs)
            finally:
                timings[_key] += time.perf_counter() - start

        setattr(owner, name, timed)


def _our_child(args: argparse.Namespace) -> None:
    """The process that runs our side (``--ours-json``): timed lm-eval run, results written as JSON."""
    from harness_ext.evaluate import run_lm_eval
    from harness_ext.results import task_metrics

    timings: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    generations: list = []
    _timed_methods(timings, counts, generations)
    metadata = {"data_dir": args.data_dir, "answer_scoring": args.answer_scoring, "mia_gradnorm": True,
                "gibberish": args.classifier}
    if args.reference:
        metadata["reference"] = args.reference
    model_args: dict = {"dtype": args.dtype}
    chat: dict = {}
    if args.chat:  # lm-eval's own flags, the date string as the chat template's keyword argument
        model_args["chat_template_args"] = {"date_string": DATE_STRING}
        chat = {"apply_chat_template": True, "system_instruction": SYSTEM_PROMPT}
    with tempfile.TemporaryDirectory() as tmp:
        res = run_lm_eval(args.model, [args.task], args.output or tmp, metadata, batch_size=args.batch_sizes[0],
                          extra_model_args=model_args, **chat)
    out = {"timings": timings, "counts": counts, "metrics": task_metrics(res)[args.task],
           "documents": res["n-samples"][args.task]["effective"], "generations": generations}
    Path(args.ours_json).write_text(json.dumps(out))


def _run_ours(args: argparse.Namespace, model: str, data_dir: str, reference: str | None, task: str,
              out: Path, setting: tuple[int, int], results_dir: Path | None = None) -> tuple[float, dict]:
    """Our side in its own process at ``setting`` (batch size, threads): (wall seconds, its results)."""
    batch_size, threads = setting
    cmd = [sys.executable, __file__, "--ours-json", str(out), "--model", model, "--data-dir", data_dir,
           "--task", task, "--batch-size", str(batch_size), "--dtype", args.dtype,
           "--answer-scoring", args.answer_scoring, "--classifier", args.classifier, *(["--chat"] if args.chat else [])]
    if reference:
        cmd += ["--reference", reference]
    if results_dir:
        cmd += ["--output", str(results_dir)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=_env(threads), capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"our side failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, json.loads(out.read_text())


# ------------------------------------------------------------------------------------------ open-unlearning
def _ou_install_steps(checkout: Path, ou_env: str) -> list[list[str]]:
    """The ``pip install`` arguments, in order, that put open-unlearning into its ``ou_env`` venv."""
    if ou_env == "own":  # its README: `pip install .[lm_eval]` (its evaluators package imports lm_eval); the extra
        # as its setup.py spells it: a pip before 23.3 does not match "lm_eval" to "lm-eval" and installs no lm-eval
        return [["-r", str(checkout / "requirements.txt")], [f"{checkout}[lm-eval]"]]
    # --no-deps: its pins (torch 2.4.1, transformers 4.45.1, datasets 3.0.1, bitsandbytes) would replace this
    # environment's CPU torch; its evaluator runs on the versions already here.
    return [["--no-deps", str(checkout)], list(OU_REQUIREMENTS)]


def _venv_kind(marker: Path) -> str:
    """The environment a kept venv holds, from its marker ("ok": written before --ou-env existed, so ours)."""
    kind = marker.read_text().strip()
    return "ours" if kind == "ok" else kind


def _ou_venv_command(ou_env: str, venv: Path, base_python: str) -> list[str]:
    if ou_env == "own":
        return [base_python, "-m", "venv", str(venv)]
    return [sys.executable, "-m", "venv", "--system-site-packages", str(venv)]


def ou_venv(checkout: Path, venv: Path, ou_env: str = "ours", base_python: str = "python3.11") -> Path:
    """open-unlearning's venv of kind ``ou_env`` (:data:`OU_ENVS`), made once: a venv holding a marker that names
    its kind is reused; one of the other kind is an error (its packages differ)."""
    python = venv / "bin" / "python"
    marker = venv / VENV_MARKER
    if marker.exists():
        kind = _venv_kind(marker)
        if kind != ou_env:
            sys.exit(f"--venv {venv} holds open-unlearning's '{kind}' environment, not '{ou_env}': give another "
                     "--venv folder (or remove that one).")
        return python
    print(f"installing open-unlearning from {checkout} into {venv} ({ou_env}: {OU_ENVS[ou_env]}) ...", flush=True)
    start = time.perf_counter()
    if not python.exists():
        subprocess.run(_ou_venv_command(ou_env, venv, base_python), check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    for step in _ou_install_steps(checkout, ou_env):
        proc = subprocess.run(pip + step, capture_output=True, text=True,
                              env={**_env(1, isolated=ou_env == "own"), "DS_BUILD_OPS": "0"})
        if proc.returncode != 0:
            sys.exit(f"pip install {' '.join(step)} failed in {venv}:\n{proc.stderr[-3000:]}")
    marker.write_text(ou_env + "\n")
    print(f"  done in {time.perf_counter() - start:.0f} s")
    return python


def _ou_versions(python: Path, ou_env: str) -> str:
    """Python and package versions of open-unlearning's venv, as a line for the output."""
    code = ("import importlib.metadata as m, sys\n"
            f"names = {OU_VERSIONS!r}\n"
            "def v(n):\n    try:\n        return m.version(n)\n    except m.PackageNotFoundError:\n"
            "        return 'absent'\n"
            "print(f'Python {sys.version.split()[0]}; ' + ', '.join(f'{n} {v(n)}' for n in names))")
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                          env=_env(1, isolated=ou_env == "own"))
    return proc.stdout.strip() if proc.returncode == 0 else f"(versions unreadable: {proc.stderr.strip()[-200:]})"


def _ou_model_view(folder: str, views: Path) -> str:
    """``folder`` as transformers 4.x (open-unlearning's own environment) reads it: a folder saved by transformers 5
    names its tokenizer class ``TokenizersBackend`` (unknown to 4.45), keeps RoPE's base in ``rope_parameters``
    (4.45 reads ``rope_theta``, else silently uses 10,000: SmolLM2's is 100,000), its dtype as ``dtype`` and its chat
    template in ``chat_template.jinja``. Such a folder gets a view under ``views``: every file linked, except
    config.json (``rope_theta``, ``rope_scaling`` unless the default RoPE, ``torch_dtype``) and tokenizer_config.json
    (``PreTrainedTokenizerFast``, the same tokenizer.json, with the model inputs ``input_ids`` and
    ``attention_mask``; the chat template) written in 4.x's keys. The same weights and tokenizer: the tiny demo
    Llama's logits and greedy tokens are equal on both sides. A folder that needs none of it is returned as is."""
    src = Path(folder)
    config = json.loads((src / "config.json").read_text()) if (src / "config.json").is_file() else {}
    tok_file = src / "tokenizer_config.json"
    tok = json.loads(tok_file.read_text()) if tok_file.is_file() else {}
    new_config, new_tok = dict(config), dict(tok)
    rope = config.get("rope_parameters")
    if isinstance(rope, dict) and "rope_theta" not in config:
        new_config["rope_theta"] = rope.get("rope_theta")
        if rope.get("rope_type", "default") != "default" and not config.get("rope_scaling"):
            new_config["rope_scaling"] = {k: v for k, v in rope.items() if k != "rope_theta"}
    if "dtype" in config and "torch_dtype" not in config:
        new_config["torch_dtype"] = config["dtype"]
    if tok.get("tokenizer_class") == "TokenizersBackend":
        new_tok["tokenizer_class"] = "PreTrainedTokenizerFast"
        new_tok.setdefault("model_input_names", ["input_ids", "attention_mask"])
    if tok and "chat_template" not in tok and (src / "chat_template.jinja").is_file():
        new_tok["chat_template"] = (src / "chat_template.jinja").read_text()
    if new_config == config and new_tok == tok:
        return folder
    view = views / src.name
    suffix = 1
    while view.exists():
        suffix += 1
        view = views / f"{src.name}_{suffix}"
    view.mkdir(parents=True)
    for f in src.iterdir():
        if f.name not in ("config.json", "tokenizer_config.json"):
            (view / f.name).symlink_to(f.resolve())
    if config:
        (view / "config.json").write_text(json.dumps(new_config, indent=2))
    if tok:
        (view / "tokenizer_config.json").write_text(json.dumps(new_tok, indent=2))
    return str(view)


def ou_data(data_dir: Path, cwd: Path) -> None:
    """``locuslab/TOFU`` under ``cwd``: the local files, and a README whose ``configs:`` names each TOFU config, so
    ``load_dataset("locuslab/TOFU", name="forget10_perturbed")`` run in ``cwd`` reads them."""
    repo = cwd / "locuslab" / "TOFU"
    repo.mkdir(parents=True, exist_ok=True)
    lines = ["---", "configs:"]
    for f in sorted(data_dir.glob("*.json")):
        (repo / f.name).write_bytes(f.read_bytes())
        lines += [f"- config_name: {f.stem}", f"  data_files: {f.name}"]
    (repo / "README.md").write_text("\n".join(lines + ["---", ""]))


def _ou_model(chat: bool, dtype: str) -> list[str]:
    """The model config of open-unlearning's run: phi-1_5's (TOFU's `Question: ...\\nAnswer: ` template), or with
    ``chat`` Llama-3.2-1B-Instruct's (chat template, system prompt, date string) on the CPU: float32 (or ``dtype``)
    and the default attention instead of its bfloat16 flash attention."""
    if not chat:
        return ["model=phi-1_5"]
    return [f"model={OU_CHAT_MODEL_CONFIG}", "~model.model_args.attn_implementation",
            f"model.model_args.torch_dtype={dtype}"]


def run_ou(python: Path, checkout: Path, cwd: Path, model: str, out: Path, forget_split: str, batch_size: int,
           overrides: list[str], chat: bool = False, dtype: str = "float32", threads: int = 1,
           isolated: bool = False) -> float:
    holdout = forget_split.replace("forget", "holdout")
    launcher = cwd / "ou_launcher.py"
    launcher.write_text(OU_LAUNCHER)
    cmd = [str(python), str(launcher), str(checkout / "src" / "eval.py"), "--config-name=eval.yaml",
           "experiment=eval/tofu/default", *_ou_model(chat, dtype),
           f"model.model_args.pretrained_model_name_or_path={model}",
           f"model.tokenizer_args.pretrained_model_name_or_path={model}", "model.model_args.device_map=cpu",
           f"forget_split={forget_split}", f"holdout_split={holdout}", f"eval.tofu.batch_size={batch_size}",
           "eval.tofu.overwrite=true", f"task_name={out.name}", f"paths.output_dir={out}", *overrides]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=_env(threads, isolated), capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"open-unlearning's evaluator failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}"
                 f"\n{proc.stderr[-3000:]}")
    return wall


def _ou_parts(log_file: Path) -> dict[str, float]:
    """Seconds per part from the timestamps of open-unlearning's eval.log ("Evaluating NAME" to the next line):
    its ``*_ROUGE`` metrics are generation (and their ROUGE scoring), the metrics computed from others' values
    (``OU_FROM_OTHERS``) are metrics, every other metric runs its own forward passes (likelihoods)."""
    events = []
    for line in log_file.read_text().splitlines():
        m = LOG_LINE.match(line)
        if m:
            events.append((datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp(), m.group(2)))
    parts: dict[str, float] = defaultdict(float)
    for (t, msg), (t_next, _) in zip(events, events[1:] + [events[-1]]):
        if msg.startswith("Evaluating "):
            name = msg.removeprefix("Evaluating ").strip()
            part = "generation" if "ROUGE" in name else "metrics" if name in OU_FROM_OTHERS else "likelihoods"
            parts[part] += t_next - t
    return parts


def _ou_results(eval_json: Path) -> tuple[dict[str, float], list[tuple[str, str]]]:
    """Its aggregate metrics, and its generations as (prompt, text) from the ``*_ROUGE`` entries."""
    data = json.loads(eval_json.read_text())
    metrics = {k: v["agg_value"] for k, v in data.items() if isinstance(v, dict) and v.get("agg_value") is not None}
    generations = [(item["input"], item["generation"]) for k, v in sorted(data.items()) if k.endswith("_ROUGE")
                   for item in v.get("value_by_index", {}).values()]
    return metrics, generations


def _tiny_classifier(tokenizer_source: str, folder: Path) -> str:
    """A random-weight 4-class BERT (seed 0; OU's default gibberish classifier has 4 classes) on the target model's
    tokenizer, padded on the right (so a text's score does not depend on its batch), saved to ``folder``: the
    classifier of both sides' gibberish metric (OU's default is a Hub download, not reachable here)."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_source)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    tokenizer.padding_side = "right"
    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=4, initializer_range=0.5,
                        pad_token_id=tokenizer.pad_token_id)
    BertForSequenceClassification(config).save_pretrained(folder)
    return str(folder)


def _gibberish_items(eval_json: Path, classifier: str) -> tuple[int, float] | None:
    """Ours (:func:`unlearn_tasks.classifier.class_probabilities`) on the very texts OU's ``forget_Q_A_gibberish``
    scored (its ``value_by_index`` keeps them), vs OU's per-item scores: (items, largest absolute difference)."""
    from unlearn_tasks.classifier import class_probabilities

    items = json.loads(eval_json.read_text()).get("forget_Q_A_gibberish", {}).get("value_by_index") or {}
    if not items:
        return None
    keys = sorted(items, key=int)
    ours = class_probabilities(classifier, [items[k]["generation"] for k in keys], max_length=32, device="cpu")
    return len(keys), max(abs(a - items[k]["score"]) for a, k in zip(ours, keys))


# ------------------------------------------------------------------------------------------------- the run
def _models(args: argparse.Namespace, work: Path) -> tuple[str, str]:
    if args.model:
        if not args.retain_model:
            sys.exit("--model needs --retain-model (the reference for Forget Quality and PrivLeak).")
        return args.model, args.retain_model
    import torch

    from unlearn_methods.scaffolding.tiny_model import build_tiny_model
    from unlearn_methods.scaffolding.tofu_corpus import tokenizer_texts, training_records

    torch.set_num_threads(max(args.threads))
    paths = []
    for name, seed, split in (("target", 0, "full"), ("retain", 1, "retain90")):
        path = work / name
        model, tokenizer = build_tiny_model(tokenizer_texts(), path, seed=seed)
        if args.finetune_epochs:
            from unlearn_methods.finetune import finetune

            print(f"fine-tuning the {name} model on '{split}' ({args.finetune_epochs} epochs) ...")
            finetune(model, tokenizer, training_records(split), path, epochs=args.finetune_epochs,
                     disable_progress=True)
        paths.append(str(path))
    return paths[0], paths[1]


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return "nan" if math.isnan(x) else f"{x:.6g}"


def _machine_info() -> dict[str, str]:
    """This machine, now: date (UTC), host, CPU model and count, load average."""
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return {"date": f"{datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC", "machine": f"{platform.node()} {platform.machine()}",
            "cpu": cpu or platform.processor() or "unknown", "cpus": str(os.cpu_count()), "load": _uptime()}


def _machine() -> str:
    """Machine, date and load, for the record (load above the core count: other work shared the CPU)."""
    m = _machine_info()
    return f"machine: {m['machine']} {m['cpu']}, {m['cpus']} CPUs; {m['date']}; {m['load']}"


def _uptime() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def _our_parts(wall: float, t: dict[str, float]) -> dict[str, float]:
    """Start-up (imports, model load, task building, exit), generation, likelihoods, metrics (the rest of
    lm-eval's ``evaluate``: building requests, scoring documents, aggregation)."""
    generation = t.get("generate_until", 0.0)
    likelihoods = sum(t.get(k, 0.0) for k in ("unlearn_answer_logprobs", "loglikelihood", "unlearn_answer_gradnorm"))
    metrics = t.get("evaluate", 0.0) - generation - likelihoods
    return {"start-up": wall - t.get("evaluate", 0.0), "generation": generation, "likelihoods": likelihoods,
            "metrics": metrics, "total": wall}


def _token_counts(tokenizer, generations: list[tuple[str, str]]) -> list[int]:
    return [len(tokenizer(text.strip(), add_special_tokens=False)["input_ids"]) for _, text in generations]


def _generation_report(model: str, ours: list, theirs: list) -> dict:
    """Tokens per item on each side (the texts scored, stripped and re-tokenised with the model's tokenizer: the
    same measure for both sides) and how many texts are identical item by item (matched on the prompt, ours
    decoded as open-unlearning records its prompts: special tokens skipped)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    ours = [(tokenizer.decode(tokenizer(p, add_special_tokens=False)["input_ids"], skip_special_tokens=True,
                              clean_up_tokenization_spaces=True), text) for p, text in ours]
    report = {}
    for side, gens in (("ours", ours), ("open-unlearning", theirs)):
        if gens:
            n = _token_counts(tokenizer, gens)
            report[side] = {"items": len(n), "tokens": sum(n), "mean": sum(n) / len(n), "max": max(n)}
    if ours and theirs:
        by_prompt = {prompt.strip(): text.strip() for prompt, text in theirs}
        matched = [(text.strip(), by_prompt[p.strip()]) for p, text in ours if p.strip() in by_prompt]
        report["identical"] = {"matched": len(matched), "identical": sum(a == b for a, b in matched)}
    return report


def _print_parts(pairs: list[dict]) -> dict:
    """Per-part seconds of each pair, then min and median per side and of the ours/OU total ratio."""
    names = ["start-up", "generation", "likelihoods", "metrics", "total"]
    has_ou = all(p.get("ou") for p in pairs)
    print(f"\n{'part (seconds)':<14} " + " ".join(
        f"{'pair ' + str(i + 1) + ' ours':>13}" + (f" {'OU':>8}" if has_ou else "") for i in range(len(pairs)))
        + f" {'ours min':>9} {'median':>8}" + (f" {'OU min':>8} {'median':>8}" if has_ou else ""))
    summary: dict = {}
    for name in names:
        ours = [p["ours"].get(name, 0.0) for p in pairs]  # a part a run did not have (--likelihood-only): 0 s
        theirs = [p["ou"].get(name, 0.0) for p in pairs] if has_ou else []
        cells = " ".join(f"{a:>13.2f}" + (f" {theirs[i]:>8.2f}" if has_ou else "") for i, a in enumerate(ours))
        line = f"{name:<14} {cells} {min(ours):>9.2f} {statistics.median(ours):>8.2f}"
        if has_ou:
            line += f" {min(theirs):>8.2f} {statistics.median(theirs):>8.2f}"
        print(line)
        summary[name] = {"ours": ours, "ou": theirs}
    if has_ou:
        ratios = [p["ours"]["total"] / p["ou"]["total"] for p in pairs]
        print(f"total ours / OU per pair: {', '.join(f'{r:.3f}' for r in ratios)}; min {min(ratios):.3f}, median "
              f"{statistics.median(ratios):.3f}; ratio of min totals {min(summary['total']['ours']) / min(summary['total']['ou']):.3f}")
        summary["ratio"] = ratios
    print("(OU's parts come from its eval.log: generation = its *_ROUGE metrics; metrics = those computed from other "
          "metrics' values; start-up = the rest of its wall time. Loads are in the log lines above.)")
    return summary


def _metric_differences(ours: dict, theirs: dict, tolerance: float, skip: tuple[str, ...] = ()) -> list[str]:
    """The metric pairs (:data:`METRIC_PAIRS`, ours named) that are not equal: |diff| above ``tolerance``, or a value
    on one side only (NaN equals NaN; a pair absent from both sides is not compared; ``skip``: ours not compared)."""
    unequal = []
    for a, b in METRIC_PAIRS:
        x, y = ours.get(a), theirs.get(b)
        if a in skip or (x is None and y is None):
            continue
        if x is None or y is None or math.isnan(x) != math.isnan(y) or (not math.isnan(x) and abs(x - y) > tolerance):
            unequal.append(a)
    return unequal


def _setting_row(batch_size: int, threads: int, pairs: list[dict], tolerance: float,
                 skip: tuple[str, ...] = ()) -> dict:
    """One setting's line of the table from its pairs, each ``{"ours": run, "ou": run or None, "generation": report}``
    (a run: ``parts`` with ``total`` seconds, ``metrics``): min and median total per side, the ratio of the min
    totals and the median of the per-pair ours/OU ratios, whether the metrics were equal in every pair, and the
    identical generated texts of the pair with fewest (``"k/n"``)."""
    ours = [p["ours"]["parts"]["total"] for p in pairs]
    row = {"batch_size": batch_size, "threads": threads, "pairs": len(pairs),
           "ours_min": min(ours), "ours_median": statistics.median(ours), "ou_min": None, "ou_median": None,
           "ratio_min": None, "ratio_median": None, "equal_metrics": None, "unequal": [], "identical": None}
    if not all(p.get("ou") for p in pairs):
        return row
    theirs = [p["ou"]["parts"]["total"] for p in pairs]
    unequal = sorted({name for p in pairs
                      for name in _metric_differences(p["ours"]["metrics"], p["ou"]["metrics"], tolerance, skip)})
    same = [p["generation"]["identical"] for p in pairs if "identical" in p.get("generation", {})]
    worst = min(same, key=lambda g: (g["identical"] - g["matched"], g["identical"])) if same else None
    row.update(ou_min=min(theirs), ou_median=statistics.median(theirs), ratio_min=min(ours) / min(theirs),
               ratio_median=statistics.median(a / b for a, b in zip(ours, theirs)), equal_metrics=not unequal,
               unequal=unequal, identical=f"{worst['identical']}/{worst['matched']}" if worst else None)
    return row


def _markdown(header: dict, rows: list[dict]) -> str:
    """The sweep's table: a heading line of the run's date, machine, CPU and load before/after, the open-unlearning
    environment, then one row per setting."""
    def num(x: float | None, spec: str = ".1f") -> str:
        return "-" if x is None else format(x, spec)

    lines = [f"**{header['date_before'][:10]}**, {header['date_before']} to {header['date_after']}; machine "
             f"{header['machine']}, CPU {header['cpu']} ({header['cpus']} CPUs); {header['load_before']} before, "
             f"{header['load_after']} after.",
             "", f"open-unlearning environment: {header['ou_env']}.", "",
             f"`{header['command']}`", "",
             "| batch | threads | pairs | ours min (s) | ours median (s) | OU min (s) | OU median (s) | "
             "ours/OU min/min | ours/OU median | equal metrics | identical texts |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        equal = "-" if r["equal_metrics"] is None else "yes" if r["equal_metrics"] else "no: " + ", ".join(r["unequal"])
        lines.append(f"| {r['batch_size']} | {r['threads']} | {r['pairs']} | {num(r['ours_min'])} | "
                     f"{num(r['ours_median'])} | {num(r['ou_min'])} | {num(r['ou_median'])} | "
                     f"{num(r['ratio_min'], '.3f')} | {num(r['ratio_median'], '.3f')} | {equal} | "
                     f"{r['identical'] or '-'} |")
    return "\n".join(lines) + "\n"


def _settings(batch_sizes: list[int], threads: list[int]) -> list[tuple[int, int]]:
    """The sweep's (batch size, threads) settings, in run order: each thread count over every batch size."""
    return [(b, t) for t in threads for b in batch_sizes]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description="A full TOFU evaluation, ours vs open-unlearning's own evaluator.",
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--open-unlearning", metavar="DIR", help="open-unlearning checkout to run side by side.")
    parser.add_argument("--ou-env", choices=sorted(OU_ENVS), default="ours",
                        help="open-unlearning's environment. " + "; ".join(f"{k}: {v}" for k, v in OU_ENVS.items())
                        + " (default ours).")
    parser.add_argument("--ou-python", default="python3.11", metavar="PYTHON",
                        help="The Python 3.11 that makes the --ou-env own venv (default python3.11).")
    parser.add_argument("--venv", metavar="DIR", help="Keep open-unlearning's venv here and reuse it (default: temp; "
                        "give one with --ou-env own, whose install downloads several GB).")
    parser.add_argument("--model", help="Target model folder, 'smollm2' (the real-model fixture, also the default "
                        "reference) or 'tiny' (the default: the tiny demo Llama).")
    parser.add_argument("--retain-model", help="Retain model folder, the reference (needed with a model folder).")
    parser.add_argument("--data-dir", help="TOFU-schema data folder (default: the demo corpus).")
    parser.add_argument("--finetune-epochs", type=float, default=0,
                        help="Fine-tune the default tiny models first (as `unlearn demo`; 0: random weights).")
    parser.add_argument("--task", default="tofu_forget10", help="tofu_forget01, tofu_forget05 or tofu_forget10.")
    parser.add_argument("--batch-sizes", "--batch-size", dest="batch_sizes", type=int, nargs="+", default=[16],
                        metavar="N", help="Batch size(s) of both sides; several: one setting each (default 16).")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--answer-scoring", default="tofu", choices=["tofu", "all"],
                        help="Our token boundary (tofu: open-unlearning's, so the numbers can be equal).")
    parser.add_argument("--chat", action="store_true",
                        help="open-unlearning's instruct setting on both sides: the model's chat template, system prompt "
                        f"{SYSTEM_PROMPT!r}, date string {DATE_STRING!r} (its Llama-3.2-1B-Instruct model config; "
                        "ours: --apply_chat_template --system_instruction, chat_template_args).")
    parser.add_argument("--likelihood-only", action="store_true",
                        help="Skip the generation metrics on both sides (ours: TASK_likelihood; OU: no ROUGE, Model "
                             "Utility or gibberish): the likelihood-based metrics, MIAs included, at a fraction of the cost.")
    parser.add_argument("--threads", type=int, nargs="+", default=[1], metavar="N",
                        help="Torch threads of each side (OMP_NUM_THREADS); several: each with every batch size.")
    parser.add_argument("--pairs", type=int, default=1,
                        help="Timed (ours, open-unlearning) pairs per setting, interleaved: ours first in odd pairs, "
                        "theirs first in even ones (default 1; 3 for a figure).")
    parser.add_argument("--tolerance", type=float, default=1e-4,
                        help="Largest |ours - OU| of a metric pair that counts as equal (default 1e-4).")
    parser.add_argument("--json", metavar="FILE", help="Also write every timing, count and metric here.")
    parser.add_argument("--markdown", metavar="FILE", help="Also write the settings table (markdown) here.")
    parser.add_argument("--classifier", help=argparse.SUPPRESS)
    parser.add_argument("--keep-ou", metavar="DIR", help="Copy open-unlearning's output folders (ou_retain, ou_target: "
                        "TOFU_EVAL.json, TOFU_SUMMARY.json) here, e.g. for `unlearn report DIR/ou_target --reference "
                        "DIR/ou_retain`.")
    parser.add_argument("--ours-json", help=argparse.SUPPRESS)
    parser.add_argument("--reference", help=argparse.SUPPRESS)
    parser.add_argument("--output", help=argparse.SUPPRESS)
    return parser


def _check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """One-line errors for bad input, before anything runs."""
    if args.task not in ("tofu_forget01", "tofu_forget05", "tofu_forget10"):
        parser.error(f"--task {args.task}: give tofu_forget01, tofu_forget05 or tofu_forget10.")
    if args.pairs < 1:
        parser.error(f"--pairs {args.pairs}: give 1 or more.")
    for flag, values in (("--batch-sizes", args.batch_sizes), ("--threads", args.threads)):
        if min(values) < 1 or len(set(values)) != len(values):
            parser.error(f"{flag} {' '.join(map(str, values))}: give distinct numbers of 1 or more.")
    if args.ou_env == "own" and not args.open_unlearning:
        parser.error("--ou-env own: give --open-unlearning DIR (the checkout whose requirements it installs).")
    marker = Path(args.venv) / VENV_MARKER if args.venv else None
    if marker and marker.exists() and _venv_kind(marker) != args.ou_env:
        parser.error(f"--venv {args.venv} holds open-unlearning's '{_venv_kind(marker)}' environment, not "
                     f"'{args.ou_env}': give another --venv folder (or remove that one).")
    if args.ou_env == "own" and not (marker and marker.exists()):
        python = shutil.which(args.ou_python)
        if python is None:
            parser.error(f"--ou-python {args.ou_python}: not found; open-unlearning's own environment needs a Python "
                         "3.11 (its setup.py: python_requires>=3.11; its README: conda create -n unlearning python=3.11).")
        version = subprocess.run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True).stdout.strip()
        if version != "3.11":
            parser.error(f"--ou-python {args.ou_python} is Python {version or '?'}: give a Python 3.11 "
                         "(open-unlearning's README environment).")
    for flag, out in (("--json", args.json), ("--markdown", args.markdown)):
        if out and Path(out).resolve() in {Path(x).resolve() for x in (args.model, args.retain_model, args.data_dir,
                                                                       args.open_unlearning) if x}:
            parser.error(f"{flag} {out} is one of the run's inputs: give another file.")


def main() -> None:
    parser = _parser()
    args = parser.parse_args()
    if args.ours_json:
        logging.disable(logging.WARNING)
        return _our_child(args)
    _check_args(parser, args)
    if args.model == "tiny":
        args.model = None
    elif args.model == "smollm2":
        from unlearn_methods.pretrained import resolve_model

        args.model = resolve_model("smollm2")
        args.retain_model = args.retain_model or args.model
    before = _machine_info()
    print(_machine())
    settings = _settings(args.batch_sizes, args.threads)
    print(f"{len(settings)} setting(s) (batch size, torch threads a side): "
          f"{', '.join(f'({b}, {t})' for b, t in settings)}; {args.dtype}, {args.pairs} pair(s) each", flush=True)
    forget_split = args.task.removeprefix("tofu_")
    record: dict = {"machine": _machine(), "args": {k: v for k, v in vars(args).items() if not k.startswith("ours")}}
    ou_env_line = "none (open-unlearning not run)"
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.data_dir:
            data_dir = Path(args.data_dir).resolve()
        else:
            from unlearn_methods.scaffolding.tofu_corpus import write_corpus

            data_dir = write_corpus(work / "data")
        model, retain = _models(args, work)
        args.classifier = _tiny_classifier(model, work / "classifier")
        task = f"{args.task}_likelihood" if args.likelihood_only else args.task
        python = checkout = None
        isolated = args.ou_env == "own"
        ou_model, ou_retain, ou_classifier = model, retain, args.classifier
        first = settings[0]
        if args.open_unlearning:
            checkout = Path(args.open_unlearning).resolve()
            if not (checkout / "src" / "eval.py").is_file():
                sys.exit(f"--open-unlearning {checkout}: no src/eval.py there; pass a checkout of "
                         "github.com/locuslab/open-unlearning.")
            python = ou_venv(checkout, Path(args.venv).resolve() if args.venv else work / "venv", args.ou_env,
                             args.ou_python)
            ou_env_line = f"{args.ou_env} ({OU_ENVS[args.ou_env]}): {_ou_versions(python, args.ou_env)}"
            print(f"open-unlearning environment: {ou_env_line}", flush=True)
            cwd = work / "ou"
            ou_data(data_dir, cwd)
            if isolated:  # transformers 4.45 there: folders saved by transformers 5 in its keys
                views = work / "ou_models"
                ou_model, ou_retain, ou_classifier = (_ou_model_view(f, views) for f in (model, retain,
                                                                                           args.classifier))
                if (ou_model, ou_retain, ou_classifier) != (model, retain, args.classifier):
                    print("open-unlearning's model folders: transformers 5's tokenizer class, RoPE and dtype keys "
                          "rewritten as transformers 4.x reads them (files linked, weights and tokenizer.json the same)")
            ref_dir = work / "ou_retain"
            print(f"open-unlearning: evaluating the retain model for the reference (not timed; once, at batch "
                  f"{first[0]}, {first[1]} thread(s)) ...", flush=True)
            run_ou(python, checkout, cwd, ou_retain, ref_dir, forget_split, first[0],
                   [f"+eval/tofu_metrics=[mia_loss,{OU_MIA[-1]}]"]  # mia_loss: our reference MIA's losses
                   + [f"~eval.tofu.metrics.{m}" for m in OU_NOT_REFERENCE], args.chat, args.dtype, first[1], isolated)
            reference = str(ref_dir / "TOFU_EVAL.json")
        else:
            print("open-unlearning side skipped: give --open-unlearning DIR (a checkout of "
                  "github.com/locuslab/open-unlearning) to run its evaluator side by side.")
            print("ours: evaluating the retain model for the reference (not timed) ...", flush=True)
            reference = str(work / "ours_retain")
            _run_ours(args, retain, str(data_dir), None, f"{args.task}_likelihood", work / "ref.json", first,
                      Path(reference))

        def ours_side(setting: tuple[int, int]) -> dict:
            print(f"  ours: evaluating {task} ({_uptime()}) ...", flush=True)
            wall, ours = _run_ours(args, model, str(data_dir), reference, task, work / "ours.json", setting)
            ours["parts"] = _our_parts(wall, ours["timings"])
            print(f"    {wall:.1f} s ({_uptime()})", flush=True)
            return ours

        def ou_side(setting: tuple[int, int]) -> dict:
            out = work / "ou_target"
            shutil.rmtree(out, ignore_errors=True)  # its eval.log is appended to: each pair's parts from its own run
            print(f"  open-unlearning: evaluating {args.task} ({_uptime()}) ...", flush=True)
            extra = [m for m in OU_EXTRA if not (args.likelihood_only and m in OU_GENERATION)]
            overrides = [f"retain_logs_path={reference}", f"+eval/tofu_metrics=[{','.join(OU_MIA + extra)}]",
                         f"eval.tofu.metrics.mia_reference.reference_model_path={ou_retain}"]
            if args.likelihood_only:
                overrides += [f"~eval.tofu.metrics.{m}" for m in OU_GENERATION if m not in OU_EXTRA]
            else:
                overrides += [*(f"eval.tofu.metrics.forget_Q_A_gibberish.{k}.pretrained_model_name_or_path="
                                f"{ou_classifier}" for k in ("classifier_model_args", "classifier_tokenization_args")),
                              "eval.tofu.metrics.forget_Q_A_gibberish.device=cpu"]
            wall = run_ou(python, checkout, cwd, ou_model, out, forget_split, setting[0], overrides, args.chat,
                          args.dtype, setting[1], isolated)
            print(f"    {wall:.1f} s ({_uptime()})", flush=True)
            parts = _ou_parts(out / "eval.log")
            parts = {"start-up": wall - sum(parts.values()), **parts, "total": wall}
            metrics, generations = _ou_results(out / "TOFU_EVAL.json")
            if args.keep_ou:
                for folder in (ref_dir, out):
                    shutil.copytree(folder, Path(args.keep_ou) / folder.name, dirs_exist_ok=True)
            return {"parts": parts, "metrics": metrics, "generations": generations,
                    "gibberish_items": _gibberish_items(out / "TOFU_EVAL.json", args.classifier)}

        for setting in settings:
            print(f"\nsetting: batch {setting[0]}, {setting[1]} torch thread(s) a side", flush=True)
            pairs: list[dict] = []
            for i in range(args.pairs):
                print(f"pair {i + 1} of {args.pairs} ({_uptime()}):", flush=True)
                sides = ["ours", "ou"] if i % 2 == 0 or not python else ["ou", "ours"]
                done = {side: (ours_side(setting) if side == "ours" else ou_side(setting))
                        for side in sides if side == "ours" or python}
                done["generation"] = _generation_report(model, done["ours"]["generations"],
                                                        done.get("ou", {}).get("generations", []))
                pairs.append(done)
            results.append({"setting": setting, "pairs": pairs})
            _report_setting(args, setting, pairs)

    skip = ("mia_reference_auc",) if args.model and args.retain_model == args.model else ()
    rows = [_setting_row(*r["setting"], r["pairs"], args.tolerance, skip) for r in results]
    after = _machine_info()
    header = {"date_before": before["date"], "date_after": after["date"], "machine": before["machine"],
              "cpu": before["cpu"], "cpus": before["cpus"], "load_before": before["load"], "load_after": after["load"],
              "ou_env": ou_env_line, "command": " ".join(["python", *sys.argv])}
    table = _markdown(header, rows)
    print("\n" + table)
    print(f"(equal metrics: every metric pair of every pair within {args.tolerance:g}"
          f"{', mia_reference left out: the retain model is the target itself' if skip else ''}; identical texts: "
          "the pair with fewest, matched on the prompt. Ratio min/min: ours' fastest over OU's fastest; median: "
          "of the per-pair ratios.)")
    print(f"finished {datetime.now(UTC):%Y-%m-%d %H:%M:%S} UTC; {_uptime()}")
    if args.markdown:
        Path(args.markdown).write_text(table)
    if args.json:
        record.update(header=header, rows=rows, settings=[
            {"batch_size": r["setting"][0], "threads": r["setting"][1],
             "pairs": [{side: ({k: v for k, v in p[side].items() if k != "generations"} if side != "generation"
                               else p[side]) for side in p} for p in r["pairs"]]} for r in results])
        Path(args.json).write_text(json.dumps(record, indent=1))


def _report_setting(args: argparse.Namespace, setting: tuple[int, int], pairs: list[dict]) -> None:
    """A setting's printout: its parts per pair, tokens, identical texts, stability and every metric pair."""
    ours, ou = pairs[-1]["ours"], pairs[-1].get("ou")
    gen = pairs[-1]["generation"]
    c = ours["counts"]
    print(f"\n{args.task}: {ours['documents']} documents, model {args.model or 'tiny demo Llama'}"
          f"{' (fine-tuned)' if args.finetune_epochs and not args.model else ''}, hf, cpu, {args.dtype}, "
          f"batch {setting[0]}, {setting[1]} thread(s), answer_scoring={args.answer_scoring}"
          f"{', chat template (OU instruct setting)' if args.chat else ''}; ours: {c.get('generate_until', 0)} "
          f"generations, {c.get('unlearn_answer_logprobs', 0)} answer scorings, {c.get('unlearn_answer_gradnorm', 0)} "
          f"gradient norms")
    _print_parts([{"ours": p["ours"]["parts"], "ou": p.get("ou", {}).get("parts")} for p in pairs])
    for side in ("ours", "open-unlearning"):
        if side in gen:
            g = gen[side]
            print(f"tokens per generated text, {side}: {g['tokens']} over {g['items']} items, mean {g['mean']:.1f}, "
                  f"max {g['max']} (the texts scored, stripped and re-tokenised)")
    print(f"tokens generated by our model calls: {c.get('generated_tokens', 0)} (EOS included; "
          f"{c.get('generated_tokens', 0) / max(c.get('generate_until', 1), 1):.1f} per item)")
    if "identical" in gen:
        print("generated texts identical item by item, per pair: " + ", ".join(
            f"{p['generation']['identical']['identical']} of {p['generation']['identical']['matched']}" for p in pairs))
    stable = all(p["ours"]["metrics"] == ours["metrics"] for p in pairs) and all(
        p["ou"]["metrics"] == ou["metrics"] for p in pairs if ou)
    print(f"metrics identical across the {len(pairs)} pair(s) on each side: {stable}")

    m_ours, m_ou = ours["metrics"], (ou or {}).get("metrics", {})
    print(f"\n{'metric (ours / open-unlearning)':<48} {'ours':>12} {'open-unl.':>12} {'|diff|':>9}")
    for a, b in METRIC_PAIRS:
        x, y = m_ours.get(a), m_ou.get(b)
        diff = abs(x - y) if x is not None and y is not None and not (math.isnan(x) or math.isnan(y)) else None
        print(f"{a + ' / ' + b:<48} {_fmt(x):>12} {_fmt(y):>12} {_fmt(diff):>9}")
    # its other keys are the parts of the metrics above (unnormalised, paraphrased and perturbed probabilities)
    theirs_only = sorted(k for k in set(m_ou) - {b for _, b in METRIC_PAIRS} if "_Q_A_" not in k)
    if theirs_only:
        print("open-unlearning only (in its timing, not in ours): " + ", ".join(f"{k} {_fmt(m_ou[k])}" for k in theirs_only))
    if ou and ou["gibberish_items"]:
        n, diff = ou["gibberish_items"]
        print(f"gibberish on OU's own {n} forget generations: ours vs OU's per-item scores, max |diff| {_fmt(diff)}")
    if ou is None:
        print("(reference: our own evaluation of the retain model; run with --open-unlearning for the other side.)")
    elif args.model and args.retain_model == args.model:
        print("(the retain model is the target itself: mia_reference compares a model with itself, so its AUROC is "
              "float noise around 0.5 on either side, not a comparable figure.)")


if __name__ == "__main__":
    main()
