"""``unlearn demo``: the whole TOFU story offline on the embedded corpus and a tiny Llama.

1. write the demo corpus (TOFU schema, Hub layout) to ``WORKDIR/data``;
2. train a tokenizer and initialise a tiny Llama;
3. fine-tune a *target* model on all authors and a *retain* model on the retain split, until memorised;
4. evaluate the retain model with our lm-eval task (it becomes the reference);
5. unlearn the forget split from the target with Gradient Difference and NPO (full fine-tuning);
6. evaluate target and unlearned models against that reference (a real Forget Quality), and every model on the
   TOFU data-transformation formats (``tofu_formats``: MCQA, cloze, analogy, odd-one-out, comprehension);
7. fine-tune on a generated Eval-DU family knowledge base and unlearn one target fact, alone and as a whole
   minimal deep-unlearning set, scored with the ``evaldu`` task;
8. relearning attack (Hu et al., 2024) on the NPO model: a few fine-tuning steps on a seeded half of the forget
   split, the other half's answer probability before and after (run last, so the rows above are unchanged);
9. print the tables and write ``WORKDIR/results.json``, ``WORKDIR/report.md`` and the Forget Quality vs Model
   Utility plot ``WORKDIR/forget_quality_vs_utility.png``.
"""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from harness_ext.results import json_safe, task_metrics
from unlearn_app.reports.numbers import format_number
from unlearn_app.reports.tables import markdown_table, relu_table
from unlearn_tasks.tofu.splits import retain_split

FORMATS_GROUP = "tofu_formats"


@dataclass
class DemoConfig:
    workdir: Path = Path("unlearn_demo")
    forget_split: str = "forget10"
    epochs: float = 40
    lr: float = 3e-3
    seed: int = 0
    backend: str = "hf"
    quiet: bool = False
    #: (method, epochs, learning rate) run from the target model; full fine-tuning of the tiny model.
    methods: tuple[tuple[str, float, float], ...] = (("graddiff", 5, 1e-3), ("npo", 5, 5e-4))
    #: Relearning attack on the NPO model (its own seed, run after every other stage): (steps, learning rate).
    relearn: tuple[int, float] = (10, 1e-3)
    relearn_seed: int = 0


def _stage(n: int, total: int, text: str) -> float:
    print(f"[{n}/{total}] {text}", flush=True)
    return time.perf_counter()


def run_demo(cfg: DemoConfig) -> dict[str, dict[str, float]]:
    """Run the demo; returns ``{model: {metric: value}}`` and writes results.json and report.md. One thread and
    deterministic algorithms (:func:`~unlearn_app.demo.run_env.reproducible`), training logs to a file."""
    from unlearn_app.demo.run_env import reproducible

    with reproducible():
        return _run_demo(cfg)


def _run_demo(cfg: DemoConfig) -> dict[str, dict[str, float]]:
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from harness_ext.evaluate import run_lm_eval
    from unlearn_app.demo.run_env import TRAINING_LOG, training_log, without_warning
    from unlearn_app.pipeline import run_unlearning
    from unlearn_app.reports.tables import relu_metrics
    from unlearn_methods import checkpoint_folder
    from unlearn_methods.config import RunConfig
    from unlearn_methods.finetune import finetune
    from unlearn_methods.scaffolding.tiny_model import build_tiny_model
    from unlearn_methods.scaffolding.tofu_corpus import tokenizer_texts, training_records, write_corpus
    from unlearn_methods.scaffolding.tofu_formats_corpus import write_formats

    hf_logging.set_verbosity_error()
    wd = cfg.workdir.resolve()
    retain_name = retain_split(cfg.forget_split)
    total, start = 9, time.perf_counter()
    task = f"tofu_{cfg.forget_split}"

    _stage(1, total, f"Writing the demo corpus (TOFU schema) to {wd / 'data'}")
    wd.mkdir(parents=True, exist_ok=True)
    (wd / TRAINING_LOG).write_text("")  # this run's training logs only
    data_dir = write_corpus(wd / "data", seed=cfg.seed)

    _stage(2, total, "Training a tokenizer and building a tiny Llama (hidden 128, 2 layers)")
    build_tiny_model(tokenizer_texts(cfg.seed), wd / "models" / "init", seed=cfg.seed)

    models = {}
    for n, (name, split) in enumerate((("target", "full"), ("retain", retain_name)), start=3):
        _stage(n, total, f"Fine-tuning the {name} model on '{split}' ({cfg.epochs:g} epochs)")
        model = AutoModelForCausalLM.from_pretrained(wd / "models" / "init")
        tokenizer = AutoTokenizer.from_pretrained(wd / "models" / "init")
        with checkpoint_folder.writing(wd / "models" / name) as folder, training_log(wd):
            metrics = finetune(model, tokenizer, training_records(split, cfg.seed), folder, epochs=cfg.epochs,
                               lr=cfg.lr, seed=cfg.seed, disable_progress=cfg.quiet)
        print(f"      final training loss {metrics.get('train_loss', float('nan')):.4f} (the Trainer's log: "
              f"{wd / TRAINING_LOG})")
        models[name] = wd / "models" / name

    unlearned = []
    for method, epochs, lr in cfg.methods:
        _stage(5, total, f"Unlearning {cfg.forget_split} from the target with {method} ({epochs:g} epochs, lr {lr:g})")
        with training_log(wd):
            run_unlearning(RunConfig(method=method, model=str(models["target"]), out=str(wd / "models" / method),
                                     data_dir=str(data_dir), forget=cfg.forget_split, lora=False, epochs=epochs,
                                     lr=lr, seed=cfg.seed, progress=not cfg.quiet, overwrite=True))
        models[method] = wd / "models" / method
        unlearned.append(method)

    _stage(6, total, f"Evaluating with lm-eval ({cfg.backend}): {task} on retain (the reference), then the others")
    table: dict[str, dict[str, float]] = {}
    formats: dict[str, dict[str, float]] = {}
    provenance: dict[str, dict] = {}  # per model and task: package, data hashes, metric modes, reference
    relu_dir = write_formats(wd / "relu_data", seed=cfg.seed)
    common = {"data_dir": str(data_dir), "relu_data_dir": str(relu_dir), "relu_pair": cfg.forget_split}
    retain_out = wd / "eval" / "retain"
    for name in ["retain", "target", *unlearned]:
        meta = common if name == "retain" else {**common, "reference": str(retain_out)}
        # The retain run is the reference the others are scored against: no warning that it has none.
        quiet = (without_warning("unlearn_tasks.tofu.task", "%s: no reference log given") if name == "retain"
                 else contextlib.nullcontext())
        with quiet:
            res = run_lm_eval(models[name], [task, FORMATS_GROUP],
                              retain_out if name == "retain" else wd / "eval" / name, meta, backend=cfg.backend,
                              log_samples=True)  # per-item values: `unlearn submit` recomputes every number
        per_task = task_metrics(res)
        provenance[name] = {t: c.get("provenance") for t, c in (res.get("configs") or {}).items() if isinstance(c, dict)}
        table[name] = per_task[task]
        formats[name] = relu_metrics(per_task)
    # The retain model against itself: Forget Quality 1 by construction, shown for reading the table.
    table["retain"]["forget_quality"] = 1.0
    table["retain"]["privleak"] = 0.0

    _stage(7, total, "Deep unlearning on a generated Eval-DU knowledge base: target fact alone vs its minimal set")
    deep = _deep_unlearning(cfg, wd)

    attacked = "npo" if "npo" in unlearned else unlearned[-1]
    steps, lr = cfg.relearn
    t0 = _stage(8, total, f"Relearning attack on {attacked}: {steps} steps on a seeded half of {cfg.forget_split}, "
                "measured on the other half")
    attack = _relearn_attack(cfg, wd, data_dir, models, attacked)
    attack["seconds"] = time.perf_counter() - t0
    print(f"      held-out answer probability {attack['before']:.4f} -> {attack['after']:.4f} "
          f"({attack['seconds']:.0f} s)")

    _stage(9, total, f"Writing {wd / 'results.json'} and {wd / 'report.md'}")
    ordered = {name: table[name] for name in ["target", *unlearned, "retain"]}
    formats = {name: formats[name] for name in ordered}
    report = _report(ordered, formats, deep, attack, cfg, task, time.perf_counter() - start)
    (wd / "results.json").write_text(json.dumps(json_safe({"task": task, "models": ordered, "formats": formats,
                                                           "deep_unlearning": deep, "relearn_attack": attack,
                                                           "provenance": provenance,
                                                           "model_dirs": {k: str(v) for k, v in models.items()}}), indent=2))
    (wd / "report.md").write_text(report)
    from unlearn_app.reports.plots import forget_quality_vs_utility

    forget_quality_vs_utility(ordered, wd / "forget_quality_vs_utility.png", f"demo: {task}")
    print()
    print(report)
    return ordered


DEEP_ROWS = [("success_du", "Success-DU (target not derivable from kept facts)"), ("recall", "Recall"),
             ("acc_relationships", "Accuracy, relationships"), ("acc_biographies", "Accuracy, biographies"),
             ("acc_all", "Accuracy, all")]


def _deep_unlearning(cfg: DemoConfig, wd: Path) -> dict:
    """Fine-tune the tiny model on a generated family knowledge base, then unlearn one target fact with the demo's
    first method, once alone and once as a whole minimal deep-unlearning set; score all three with ``evaldu``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness_ext.evaluate import run_lm_eval
    from unlearn_app.demo.run_env import training_log
    from unlearn_app.pipeline import run_unlearning
    from unlearn_methods import checkpoint_folder
    from unlearn_methods.config import RunConfig
    from unlearn_methods.finetune import finetune
    from unlearn_tasks.deep_unlearning import evaluation_questions, write_generated_evaldu

    kb_dir = wd / "evaldu_kb"
    kb = write_generated_evaldu(kb_dir, n_people=24, seed=cfg.seed, n_targets=4, minimal_set_seeds=20)
    target = kb.targets[0]
    base = wd / "models" / "evaldu_base"
    records = [{"question": q["question"], "answer": q["answer"]} for q in evaluation_questions(kb)]
    with checkpoint_folder.writing(base) as folder, training_log(wd):
        finetune(AutoModelForCausalLM.from_pretrained(wd / "models" / "init"),
                 AutoTokenizer.from_pretrained(wd / "models" / "init"), records, folder, epochs=cfg.epochs * 2.5,
                 lr=cfg.lr, seed=cfg.seed, disable_progress=cfg.quiet)
    method, epochs, lr = cfg.methods[0]
    models = {"knows all": base}
    for label, minimal in ((f"{method}, target fact", False), (f"{method}, minimal set", True)):
        out = wd / "models" / f"evaldu_{method}_{'set' if minimal else 'fact'}"
        # One forget fact per step: the forget loss is a batch mean, so a batch of k facts gives each 1/k of the
        # ascent. With batch size 1 every fact of the minimal set gets the same full-weight steps as the target
        # fact gets alone (that run is unchanged: its forget set has one fact, so its batches always held one).
        with training_log(wd):
            run_unlearning(RunConfig(method=method, model=str(base), out=str(out), data="evaldu",
                                     data_dir=str(kb_dir), evaldu_target=target, evaldu_minimal_set=minimal,
                                     lora=False, epochs=epochs * 2, lr=lr / 2, batch_size=1, seed=cfg.seed,
                                     progress=not cfg.quiet, overwrite=True))
        models[label] = out
    scores = {}
    for label, path in models.items():
        res = run_lm_eval(path, ["evaldu"], wd / "eval" / f"evaldu_{path.name}", {"data_dir": str(kb_dir), "target": target},
                          backend=cfg.backend)
        scores[label] = task_metrics(res)["evaldu"]
    return {"target": target, "target_fact": kb.fact_text(target), "models": scores}


def _relearn_attack(cfg: DemoConfig, wd: Path, data_dir: Path, models: dict[str, Path], attacked: str) -> dict:
    """The relearning attack on ``attacked`` (seeded half of the forget split shown, the other half measured), with
    the target and retain models' answer probabilities on the same held-out items for reference."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from unlearn_app.demo.run_env import training_log
    from unlearn_app.reports.attack_recovery import recovery_ratio
    from unlearn_methods.attacks.relearn import answer_probability, relearn
    from unlearn_methods.forget_retain import load_qa

    steps, lr = cfg.relearn
    with training_log(wd):
        r = relearn(models[attacked], wd / "models" / f"{attacked}_relearn", data="demo", forget=cfg.forget_split,
                    data_dir=str(data_dir), relearn_fraction=0.5, steps=steps, lr=lr, seed=cfg.relearn_seed,
                    progress=not cfg.quiet)
    records = load_qa(cfg.forget_split, data_dir=str(data_dir))
    held = [records[i] for i in r.held_out]
    refs = {name: answer_probability(AutoModelForCausalLM.from_pretrained(models[name]),
                                     AutoTokenizer.from_pretrained(models[name]), held) for name in ("target", "retain")}
    return {"model": attacked, "steps": steps, "lr": lr, "seed": cfg.relearn_seed, "shown": len(r.shown),
            "held_out": len(r.held_out), "before": r.held_out_prob_before, "after": r.held_out_prob_after,
            "target": refs["target"], "retain": refs["retain"],
            "recovery": recovery_ratio(r.held_out_prob_before, r.held_out_prob_after, refs["target"])}


def _attack_section(a: dict, cfg: DemoConfig) -> str:
    return (
        f"## Does the forgetting last? Relearning attack on {a['model']} (Hu et al.)\n\n"
        f"{a['model']} was fine-tuned for {a['steps']} steps (lr {a['lr']:g}, seed {a['seed']}) on a seeded half of "
        f"{cfg.forget_split} ({a['shown']} items); the row is the length-normalised answer probability of the other "
        f"{a['held_out']} items, which the attack never showed (`unlearn attack relearn`).\n\n"
        f"| held-out forget items | target | {a['model']} | {a['model']} after relearning | retain | recovery |\n"
        f"|---|---:|---:|---:|---:|---:|\n"
        f"| Forget probability | {format_number(a['target'])} | {format_number(a['before'])} | "
        f"{format_number(a['after'])} | {format_number(a['retain'])} | {format_number(a['recovery'])} |\n\n"
        f"recovery = (after - before) / (target - before): 0 = nothing came back, 1 = back to the target.\n\n"
    )


def _report(models: dict[str, dict[str, float]], formats: dict[str, dict[str, float]], deep: dict, attack: dict,
            cfg: DemoConfig, task: str, seconds: float) -> str:
    return (
        f"# lm-eval-unlearning demo: {task}\n\n"
        f"Tiny Llama fine-tuned on the embedded fictitious-author corpus. *target* saw every author; *retain* never "
        f"saw the {cfg.forget_split} authors, so it is what perfect unlearning should look like; the middle columns "
        f"are the target after an unlearning method ({', '.join(m for m, _, _ in cfg.methods)}). Forget Quality is "
        f"the KS-test p-value between each model's forget-set truth ratios and the retain model's (high = "
        f"indistinguishable from retain); the retain column's Forget Quality (1) and PrivLeak (0) hold by definition.\n\n"
        f"{markdown_table(models)}\n\n"
        f"## The same facts in other formats ({FORMATS_GROUP}: forget vs retain; Joshi et al.)\n\n"
        f"A model that looks unlearned in TOFU's question-answer format may still recall the facts in another format. "
        f"The tiny model was never taught the multiple-choice formats, so those rows sit near chance; cloze and "
        f"comprehension show the gaps.\n\n"
        f"{relu_table(formats)}\n\n"
        f"## Deep unlearning (Eval-DU style, generated family knowledge base; Wu et al.)\n\n"
        f"Target fact {deep['target']}: {deep['target_fact']} Unlearning the fact alone can leave it derivable from "
        f"kept facts through the family rules; unlearning a whole minimal deep-unlearning set removes every path. "
        f"The tiny model memorises only part of this knowledge base (see the first column's accuracy), so read the "
        f"columns against each other, not as absolute numbers.\n\n"
        f"{markdown_table(deep['models'], DEEP_ROWS)}\n\n"
        f"{_attack_section(attack, cfg)}"
        f"Backend: {cfg.backend}; seed {cfg.seed}; wall time {seconds:.0f} s.\n"
    )
