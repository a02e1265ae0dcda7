"""One unlearning training run: load the model, pair forget/retain data, train with the method's loss, save the
checkpoint folder. Evaluating it, writing its model card and pushing it are the application's
(:mod:`unlearn_app.pipeline`).

Under a launcher (``accelerate launch``, ``torchrun``) every process runs :func:`train`: each loads the model (and,
for a method that runs the reference during training, its reference copy) and trains on its share of every step;
the main process alone prepares ``OUT.partial``, writes the files (the reference values a method computes once,
:mod:`unlearn_methods.reference`) and publishes the folder, the others waiting for it (:func:`main_process`)."""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml
from accelerate.utils import broadcast_object_list
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainingArguments

from unlearn_methods import all_methods, checkpoint_folder, get_method, reference, run_checkpoints
from unlearn_methods.base import NonFiniteLossError, UnlearnMethod, UnlearnTrainer
from unlearn_methods.config import RunConfig, coerce_method_params, run_fields
from unlearn_methods.eval_during import (
    ROWS_FILE,
    EvalDuringTraining,
    EvalDuringTrainingError,
    Metrics,
    Selected,
    SelectionRule,
    lm_eval_evaluator,
)
from unlearn_methods.finetune import finetune
from unlearn_methods.processes import MainProcessError, main_process
from unlearn_methods.prompt_format import prompt_format_of, resolve_prompt_format
from unlearn_tasks.settings import read_settings

log = logging.getLogger(__name__)
CONFIG_FILE = checkpoint_folder.CONFIG_FILE
METRICS_FILE = "train_metrics.json"


class UnlearningFailed(RuntimeError):
    """The run stopped; the message says why, what was kept and how to go on."""


@dataclass
class UnlearnRun:
    cfg: RunConfig
    method: UnlearnMethod
    tokenizer: Any = None
    model: Any = None
    forget: list[dict] = field(default_factory=list)
    retain: list[dict] = field(default_factory=list)
    out: Path = Path(".")
    alternates: list[list[str]] | None = None  # alternate answers per forget item (AltPO sets them in prepare)

    # ------------------------------------------------------------------ helpers used by methods
    def base_model_for_arithmetic(self):
        """The loaded model's own weights (not LoRA-wrapped), for weight arithmetic."""
        return self.model

    def reinforced_model(self, epochs: float, lr: float | None):
        """A copy of the base model fine-tuned further on the forget set (Task Vector, WHP), in the run's prompt
        format."""
        reinforced = copy.deepcopy(self.model)
        with tempfile.TemporaryDirectory() as tmp:
            finetune(reinforced, self.tokenizer, self.forget, tmp, epochs=epochs, lr=lr or self.cfg.lr,
                     batch_size=self.cfg.batch_size, seed=self.cfg.seed, disable_progress=not self.cfg.progress,
                     save=False, prompt=prompt_format_of(self.cfg))
        return reinforced


def _load(cfg: RunConfig, tokenizer: Any = None):
    """The tokenizer (``tokenizer`` when :func:`check_run` loaded it already) and the model; for vision data the
    processor and the vision-language model."""
    dtype = getattr(torch, cfg.dtype) if cfg.dtype != "auto" else "auto"
    if cfg.source.vision:
        from unlearn_methods.vlm import load_vision_model

        try:
            return load_vision_model(cfg.model, dtype)
        except (OSError, ValueError) as e:
            raise UnlearningFailed(
                f"Could not load {cfg.model!r} as a vision-language model with its processor ({e}). --data {cfg.data} needs "
                f"a LLaVA-style checkpoint (AutoModelForImageTextToText + AutoProcessor), local or on the Hub."
            ) from e
    try:
        tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(cfg.model)
        model = AutoModelForCausalLM.from_pretrained(cfg.model, dtype=dtype)
    except OSError as e:
        raise UnlearningFailed(
            f"Could not load the model {cfg.model!r} ({e}). Pass a local checkpoint folder or a Hub id you can "
            f"access (gated models need `hf auth login` or HF_TOKEN)."
        ) from e
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer, model


def _wrap_lora(cfg: RunConfig, model):
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=cfg.lora_target_modules, task_type="CAUSAL_LM")
    return get_peft_model(model, lora)


#: TrainingArguments' name of activation (gradient) checkpointing: transformers 5 renamed it.
_CHECKPOINTING = next(name for name in ("activation_checkpointing", "gradient_checkpointing")
                      if name in {f.name for f in dataclasses.fields(TrainingArguments)})


def _training_args(cfg: RunConfig, out: Path, n_examples: int) -> TrainingArguments:
    args = TrainingArguments(
        output_dir=str(out / "checkpoints"),
        num_train_epochs=cfg.epochs,
        learning_rate=cfg.lr,
        per_device_train_batch_size=cfg.batch_size,
        gradient_accumulation_steps=cfg.grad_accum,
        warmup_steps=cfg.warmup_steps,
        lr_scheduler_type="constant_with_warmup" if cfg.warmup_steps else "constant",
        weight_decay=0.0,
        **{_CHECKPOINTING: cfg.gradient_checkpointing,
           # non-reentrant: LoRA's gradients flow through the frozen embeddings' outputs without requires_grad
           f"{_CHECKPOINTING}_kwargs": {"use_reentrant": False}},
        save_strategy="steps",
        save_total_limit=2,
        report_to=[],
        seed=cfg.seed,
        data_seed=cfg.seed,
        remove_unused_columns=False,
        use_cpu=not torch.cuda.is_available(),
        disable_tqdm=not cfg.progress,
        dataloader_num_workers=0,
    )
    # the steps of an epoch: --batch-size rows per process (per GPU under DataParallel) and micro-batch
    global_batch = args.train_batch_size * cfg.grad_accum * main_process().num_processes
    steps_per_epoch = max(1, -(-n_examples // global_batch))
    args.logging_steps = max(1, steps_per_epoch // 2)
    args.save_steps = cfg.save_steps or steps_per_epoch
    return args


def portable_config(cfg: RunConfig, out: Path) -> dict[str, Any]:
    """``cfg`` as saved next to the checkpoint: local paths as the user gave them, or relative to the checkpoint
    folder when given absolute, so no absolute path of this machine is written (or uploaded)."""
    values = cfg.to_dict()
    for key in (f.name for f in run_fields() if f.metadata["path"]):  # the data sources' registered now too
        value = values.get(key)
        if value and os.path.isabs(os.path.expanduser(str(value))) and os.path.exists(os.path.expanduser(str(value))):
            values[key] = os.path.relpath(Path(str(value)).expanduser().resolve(), out)
    values["out"] = "."
    return values


def check_output_folder(cfg: RunConfig) -> Path:
    """The resolved ``--out``, checked: never the model folder (or inside it), nor ``OUT.partial`` (where the run
    trains, :func:`working_folder`) the model folder or holding it, and not a non-empty folder unless
    ``--overwrite`` (or ``--resume``) is given. Creates nothing."""
    out = Path(cfg.out).expanduser().resolve()
    work = checkpoint_folder.partial_path(out)
    model = Path(cfg.model).expanduser()
    if model.exists():
        model = model.resolve()
        if out == model or model in out.parents:
            raise UnlearningFailed(
                f"--out {cfg.out} is the --model folder {cfg.model} or inside it: saving there would overwrite or alter "
                f"the base model. Choose another --out."
            )
        if work == model or work in model.parents:
            raise UnlearningFailed(
                f"--out {cfg.out} would train in {work}, which is or holds the --model folder {cfg.model}. Choose "
                f"another --out."
            )
    if out.exists() and not out.is_dir():
        raise UnlearningFailed(f"--out {cfg.out} is a file, not a folder. Choose a folder for the checkpoint.")
    # --resume goes on with the run saved in OUT (or OUT.partial); other files in OUT would be replaced with it
    if out.is_dir() and not (cfg.overwrite or (cfg.resume and (_holds_run(out) or _holds_run(work)))):
        present = sorted(p.name for p in out.iterdir())
        if present:
            raise UnlearningFailed(
                f"--out {cfg.out} is not empty ({', '.join(present[:5])}{', ...' if len(present) > 5 else ''}); its files "
                f"would be replaced. Pass --overwrite to replace them, --resume to continue the run saved there, or "
                f"choose an empty folder."
            )
    if work.is_dir() and any(work.iterdir()) and not (cfg.overwrite or cfg.resume):
        raise UnlearningFailed(
            f"{work} holds an unfinished run (stopped before its checkpoint was complete). Pass --resume to continue "
            f"it, --overwrite to start afresh, or choose another --out."
        )
    return out


def _holds_run(folder: Path) -> bool:
    """Whether ``folder`` holds an ``unlearn run`` (its saved config or its checkpoints)."""
    return (folder / CONFIG_FILE).is_file() or (folder / "checkpoints").is_dir()


def working_folder(cfg: RunConfig, out: Path) -> Path:
    """``OUT.partial``, where the run trains and saves (renamed to ``out`` once the checkpoint is complete), ready:
    with ``--resume`` the unfinished run there, else a finished run in ``out`` moved there to go on training (after
    :func:`check_resume`); otherwise empty."""
    work = checkpoint_folder.partial_path(out)
    if cfg.resume:
        if not work.is_dir() and _holds_run(out):
            check_resume(cfg, out)
            os.replace(out, work)  # the finished run trains on; ``out`` reappears when it is complete again
        elif work.is_dir():
            check_resume(cfg, work)
    elif work.exists():  # --overwrite (refused before otherwise): the unfinished run is not this one
        shutil.rmtree(work)
    try:
        work.mkdir(parents=True, exist_ok=True)
        probe = work / ".unlearn_write_test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UnlearningFailed(f"Cannot write the checkpoint to --out {cfg.out}: {e.strerror or e}. "
                               "Choose a folder you can write to.") from None
    return work


def check_resume(cfg: RunConfig, out: Path) -> None:
    """Refuse ``--resume`` when the run saved in ``out`` used other settings, naming each difference."""
    saved_file = out / CONFIG_FILE
    if not saved_file.is_file():
        if (out / "checkpoints").is_dir():
            raise UnlearningFailed(f"--resume: {out} has checkpoints but no {CONFIG_FILE}, so they cannot be checked "
                                   "against this run's settings. Use an empty --out (or --overwrite without --resume).")
        return
    saved = read_settings(saved_file, "saved configuration").data or {}
    current = portable_config(cfg, out)
    # an option added after the run was saved is taken at its default (the value the run had)
    defaults = {f.name: f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
                for f in run_fields()}
    resume_keys = [f.name for f in run_fields() if f.metadata["resume"]]  # the data sources' registered now too
    defaults["prompt_format"] = "plain"  # runs saved before --prompt-format trained on the plain prompt
    defaults["ou_chat_mask"] = False  # and before --ou-chat-mask with every token but the padding attended
    saved = {k: saved.get(k, defaults.get(k)) for k in resume_keys} | saved
    if saved.get("method") == current.get("method") and isinstance(saved.get("method_params"), dict):
        try:  # a hyperparameter added since the run was saved is taken at its default (the value the run had)
            saved["method_params"] = coerce_method_params(current["method"], saved["method_params"])
        except ValueError:
            pass  # reported as a difference below
    if current.get("prompt_format") != "chat" and saved.get("prompt_format") != "chat":
        resume_keys.remove("ou_chat_mask")  # it applies to the chat format only
    if (written := _written_by(out)) is not None:
        saved |= _written_with(out) or {}  # the last checkpoint's, where the config is of a later, unfinished try
        if written != main_process().num_processes:
            resume_keys = [k for k in resume_keys if k not in ("batch_size", "grad_accum")]  # check_global_batch's
    diffs = [f"{k}: saved {saved.get(k)!r}, now {current.get(k)!r}" for k in resume_keys if saved.get(k) != current.get(k)]
    saved_epochs = saved.get("epochs")
    if isinstance(saved_epochs, (int, float)) and current["epochs"] < saved_epochs:  # it would rewrite the saved config
        diffs.append(f"epochs: saved {saved_epochs!r}, now {current['epochs']!r} (--resume may add epochs, not remove "
                     "them)")
    if diffs:
        raise UnlearningFailed(
            f"--resume: the run saved in {cfg.out} used other settings ({'; '.join(diffs)}). Resume with the same "
            f"settings, or start afresh in an empty --out (or with --overwrite and without --resume)."
        )


def _written_by(folder: Path) -> int | None:
    """How many processes wrote the last checkpoint of the run saved in ``folder`` (None without one): the Trainer
    writes one RNG state per process, ``rng_state_{i}.pth`` (``rng_state.pth`` alone)."""
    last = run_checkpoints.newest_complete(folder / "checkpoints")
    return None if last is None else max(1, len(list(last.glob("rng_state_*.pth"))))


def _written_with(folder: Path) -> dict[str, Any] | None:
    """``{"batch_size", "grad_accum"}`` the last checkpoint of the run in ``folder`` was written with (its
    :class:`~unlearn_methods.base.RunLayout`; None for a checkpoint without one, whose settings are the saved
    configuration's): a later try on other settings, stopped before its first checkpoint, rewrote the configuration."""
    last = run_checkpoints.newest_complete(folder / "checkpoints")
    if last is None:
        return None
    try:
        stored = json.loads((last / "trainer_state.json").read_text())["stateful_callbacks"]["RunLayout"]
        layout = (stored[0] if isinstance(stored, list) else stored)["attributes"]["layout"]
        values = {k: layout[k] for k in ("batch_size", "grad_accum")}
    except (OSError, ValueError, KeyError, TypeError, IndexError, RecursionError):
        return None
    return values if all(isinstance(v, int) and v > 0 for v in values.values()) else None


def check_global_batch(cfg: RunConfig, out: Path) -> None:
    """``--resume`` on another number of processes than wrote the checkpoint goes on with the same run only at the
    same global batch (processes x ``--batch-size`` x ``--grad-accum`` rows a step; the Trainer counts steps, and
    torch's distributed checkpoint reshards a sharded one): refuse another, in one line, on every process."""
    work = checkpoint_folder.partial_path(out)
    folder = work if work.is_dir() else out
    now = main_process().num_processes
    if not cfg.resume or not (folder / CONFIG_FILE).is_file() or (written := _written_by(folder)) in (None, now):
        return
    saved = _written_with(folder) or read_settings(folder / CONFIG_FILE, "saved configuration").data or {}
    size, accum = saved.get("batch_size"), saved.get("grad_accum", 1)
    if not isinstance(size, int) or not isinstance(accum, int):
        return  # check_resume names the difference
    rows, here = written * size * accum, now * cfg.batch_size * cfg.grad_accum
    if rows == here:
        return
    each = rows // now
    size_here = next((b for b in (cfg.batch_size, size) if each % b == 0), 1)
    advice = (f"Resume on {_processes(now)} with --batch-size and --grad-accum making {each} rows per process (e.g. "
              f"--batch-size {size_here} --grad-accum {each // size_here}), or on {_processes(written)}."
              if rows % now == 0 else f"{rows} rows do not divide among {_processes(now)}: resume on "
              f"{_processes(written)}.")
    raise UnlearningFailed(
        f"--resume: the checkpoint in {cfg.out} was written by {_processes(written)} with --batch-size {size} "
        f"--grad-accum {accum}, {rows} rows a step; {_processes(now)} with --batch-size {cfg.batch_size} "
        f"--grad-accum {cfg.grad_accum} would take {here}. {advice}")


def _processes(n: int) -> str:
    return f"{n} process{'es' if n > 1 else ''}"


@dataclass
class TrainedCheckpoint:
    """What :func:`train` leaves behind: the checkpoint folder and what the model card and evaluation need."""

    out: Path
    method: UnlearnMethod
    adapter: bool  # a LoRA adapter folder (load with the base model) rather than full weights
    data_dir: str | None  # the local data the run read, if any (the evaluation reads the same)
    train_metrics: dict[str, Any]
    #: With ``--eval-every``: the rows file, the interval and, with ``--select``, the selected step (else None).
    eval_during_training: dict[str, Any] | None = None


def _eval_callback(cfg: RunConfig, tokenizer, data_dir: str | None, out: Path, select: SelectionRule | None,
                   evaluator: Callable[[Any], Metrics] | None,
                   on_row: Callable[[dict[str, Any]], None] | None = None) -> EvalDuringTraining | None:
    if cfg.eval_every is None:
        return None
    if evaluator is None:
        metadata = {**({"data_dir": data_dir} if data_dir else {}), **cfg.source.eval_metadata(cfg), **cfg.eval_metadata}
        evaluator = lm_eval_evaluator(tokenizer, list(cfg.eval_tasks), metadata, limit=cfg.eval_limit,
                                      prompt=prompt_format_of(cfg))
    return EvalDuringTraining(evaluator, cfg.eval_every, out, select, on_row)


def _selection_record(cfg: RunConfig, callback: EvalDuringTraining, selected: Selected | None,
                      final_step: int) -> dict[str, Any]:
    record: dict[str, Any] = {"file": ROWS_FILE, "every": cfg.eval_every, "tasks": list(cfg.eval_tasks),
                              "final_step": final_step, "evaluated_steps": sorted(callback.evaluated)}
    if cfg.select:
        record.update({"select": cfg.select, "select_if": list(cfg.select_if),
                       "ineligible_steps": callback.ineligible_steps,
                       "selected_step": selected.step if selected else final_step,
                       "selected_epoch": selected.epoch if selected else None,
                       "selected_value": selected.value if selected else None,
                       "nan_steps": callback.nan_steps})
    return record


def train(cfg: RunConfig, select: SelectionRule | None = None, evaluator: Callable[[Any], Metrics] | None = None,
          finish: Callable[[TrainedCheckpoint], None] | None = None,
          on_row: Callable[[dict[str, Any]], None] | None = None) -> TrainedCheckpoint:
    """Train ``cfg`` and save the checkpoint. Raises :class:`UnlearningFailed` with a message to act on.

    Three steps: :func:`check_run` (every check, before any file is written), :func:`fit` (load, train) and
    :func:`save`. The run trains and saves in ``OUT.partial`` (:func:`working_folder`); ``finish(checkpoint)`` (the
    model card) is called there, then the folder is renamed to ``OUT``: ``OUT`` appears only complete.

    With ``cfg.eval_every``, ``evaluator(model) -> {task: {metric: value}}`` (default: lm-eval on ``cfg.eval_tasks``)
    runs during training; ``select``, the parsed ``cfg.select`` (:func:`unlearn_app.selection.parse_select`), picks
    the evaluated step whose weights are saved; ``on_row(row)`` is called with every evaluation row once written.
    """
    method, final, tokenizer = check_run(cfg, select)
    procs = main_process()
    procs.wait_for_everyone()  # every process has checked --out before the main one prepares it
    if procs.is_main_process:
        out = working_folder(cfg, final)  # a fresh folder unless resuming: nothing of an earlier run is kept
        (out / CONFIG_FILE).write_text(yaml.safe_dump(portable_config(cfg, final), sort_keys=False))
    procs.wait_for_everyone()
    out = checkpoint_folder.partial_path(final)
    try:
        fitted = fit(cfg, method, out, select, evaluator, on_row, tokenizer)
    except BaseException:
        if procs.is_main_process and not cfg.resume and not _trained_in(out):
            shutil.rmtree(out, ignore_errors=True)  # nothing to resume: the next run is not blocked by it
        raise
    return save(cfg, fitted, final, finish)


def _trained_in(work: Path) -> bool:
    """Whether the working folder holds anything of training (checkpoints, evaluations, metrics, the last good
    weights), which a stopped run keeps for ``--resume``; before training it holds only the config (and data)."""
    return (any((work / name).exists() for name in (ROWS_FILE, METRICS_FILE, "last_good"))
            or any((work / "checkpoints").glob("*")))  # the Trainer makes the folder before its first step


def check_run(cfg: RunConfig, select: SelectionRule | None = None) -> tuple[UnlearnMethod, Path, Any]:
    """Every check of the run, writing nothing: the options, the method's hyperparameters, the method against the
    data source (raw text, vision) and against ``--eval-every``, the data source's own (RWKU's targets), the output
    folder. Returns the method, the resolved ``--out`` and the tokenizer when the prompt format needed it (None
    otherwise); fills in ``cfg``'s splits and method parameters."""
    cfg.validate()
    if cfg.select and select is None:
        raise ValueError(f"--select {cfg.select!r} given without its parsed rule; run it through "
                         "unlearn_app.pipeline.run_unlearning (or pass select=parse_select(cfg.select)).")
    method = get_method(cfg.method, cfg.method_params)  # parses and checks the hyperparameters before anything else
    source = cfg.source
    if cfg.eval_every is not None and not method.trains:
        raise UnlearningFailed(f"--eval-every: the {method.name} method does not train step by step (it computes the "
                               "weights once), so there is nothing to evaluate during training. Leave --eval-every "
                               "out; --eval-tasks evaluates the result.")
    if cfg.eval_every is not None and source.vision:
        raise UnlearningFailed(f"--eval-every is not available with --data {cfg.data} yet (vision-language models are "
                               "evaluated with hf-multimodal); leave it out, --eval-tasks evaluates the result.")
    if source.text and method.qa_only:
        qa_only = sorted(name for name, cls in all_methods().items() if cls.qa_only)
        raise UnlearningFailed(
            f"--data {cfg.data} is raw text, but the {method.name} loss needs questions (refusals or other "
            f"answers to them). Methods for raw text: every method except {', '.join(qa_only)}."
        )
    if source.vision and not method.vision:
        raise UnlearningFailed(f"The {method.name} method fine-tunes a text-only copy of the model or generates text, and "
                               f"is not available with --data {cfg.data}; use another method (`unlearn methods`).")
    out = check_output_folder(cfg)
    check_global_batch(cfg, out)
    source.resolve_splits(cfg)
    tokenizer = resolve_prompt_format(cfg)  # auto -> chat or plain, before the config is saved or compared by --resume
    cfg.method_params = method.params.to_dict()
    return method, out, tokenizer


@dataclass
class Fitted:
    """What :func:`fit` gives :func:`save`: the trained model in the working folder ``out``."""

    out: Path
    method: UnlearnMethod
    run: UnlearnRun
    model: Any
    data_dir: str | None
    adapter: bool
    train_metrics: dict[str, Any]
    eval_record: dict[str, Any] | None
    trainer: Any = None  # the Trainer that trained it (its save_model gathers FSDP / ZeRO-3 shards)


def fit(cfg: RunConfig, method: UnlearnMethod, out: Path, select: SelectionRule | None = None,
        evaluator: Callable[[Any], Metrics] | None = None,
        on_row: Callable[[dict[str, Any]], None] | None = None, tokenizer: Any = None) -> Fitted:
    """Load the model and the data, and train in the working folder ``out`` (checked by :func:`check_run`, whose
    tokenizer is given, if it loaded one); under a launcher, every process trains its share and the main process
    alone writes."""
    procs = main_process()
    source = cfg.source
    torch.manual_seed(cfg.seed)
    tokenizer, model = _load(cfg, tokenizer)  # a vision source: the processor (it saves with the checkpoint) and the VLM
    data_dir = None
    if procs.is_main_process:
        data_dir = source.local_data(cfg, out)
        source.write_corpus(cfg, out, data_dir, model, tokenizer)
    if procs.num_processes > 1:
        data_dir = broadcast_object_list([data_dir])[0]
    procs.wait_for_everyone()
    forget, retain = source.load(cfg, data_dir)
    run = UnlearnRun(cfg, method, tokenizer, model, forget, retain, out)
    method.prepare(run)

    train_metrics: dict[str, Any] = {}
    eval_record: dict[str, Any] | None = None
    adapter = False
    if method.trains:
        dataset = source.training_set(run, tokenizer)
        check_answer_tokens(cfg, dataset)
        collator = source.collator(tokenizer, prompt_format_of(cfg))
        try:  # the reference's per-row values, once, from the model before any adapter or training step
            dataset, collator, reference_record = reference.attach(model, dataset, collator, method.reference_nll,
                                                                   cfg.batch_size, out, cfg.resume)
        except (reference.ReferenceValuesError, MainProcessError) as e:
            raise UnlearningFailed(f"--resume: {e}") from None
        model = _wrap_lora(cfg, model) if cfg.lora else model
        adapter = cfg.lora and not cfg.merge
        callback = _eval_callback(cfg, tokenizer, data_dir, out, select, evaluator, on_row)
        trainer = UnlearnTrainer(model=model, args=_training_args(cfg, out, len(dataset)), train_dataset=dataset,
                                 data_collator=collator, method=method, l1_lora=cfg.l1_lora,
                                 callbacks=[callback] if callback else None)
        if callback and procs.num_processes > 1 and _sharded(trainer):
            raise UnlearningFailed("--eval-every evaluates on the main process, which holds only a shard of the weights "
                                   "under FSDP or DeepSpeed ZeRO-3; leave --eval-every out (evaluate the checkpoint "
                                   "with lm_eval), or train with DDP or LoRA.")
        resume = _resume_checkpoint(out / "checkpoints") if cfg.resume else None
        try:
            result = trainer.train(resume_from_checkpoint=resume)
        except KeyboardInterrupt:
            kept = f" The evaluations made so far are in {out / ROWS_FILE}." if callback else ""
            raise UnlearningFailed(
                f"Interrupted at step {trainer.state.global_step}. Checkpoints saved so far are in {out / 'checkpoints'}; "
                f"run the same command with --resume to continue.{kept}"
            ) from None
        except EvalDuringTrainingError as e:
            raise UnlearningFailed(f"{e} (evaluations so far: {out / ROWS_FILE}).") from e
        except NonFiniteLossError as e:
            keep = out / "last_good"
            save_whole(trainer, keep)
            if procs.is_main_process:
                tokenizer.save_pretrained(str(keep))
                (out / METRICS_FILE).write_text(json.dumps({"log_history": trainer.state.log_history, "error": str(e)},
                                                           indent=2))
            raise UnlearningFailed(
                f"{e} The weights before the failing step are in {keep}; periodic checkpoints are in "
                f"{out / 'checkpoints'} (resume with --resume after changing the settings)."
            ) from e
        train_metrics = dict(result.metrics)
        model = trainer.model
        saved: dict[str, Any] = {"metrics": train_metrics, "log_history": trainer.state.log_history}
        if reference_record:
            saved["reference_nll"] = reference_record
        if callback:
            try:
                selected = callback.restore_best(model, trainer.state.global_step)
            except EvalDuringTrainingError as e:
                raise UnlearningFailed(str(e)) from e
            eval_record = saved["eval_during_training"] = _selection_record(cfg, callback, selected,
                                                                            trainer.state.global_step)
        if procs.is_main_process:
            (out / METRICS_FILE).write_text(json.dumps(saved, indent=2))
    return Fitted(out, method, run, model, data_dir, adapter, train_metrics, eval_record,
                  trainer if method.trains else None)


def _resume_checkpoint(checkpoints: Path) -> str | None:
    """The newest complete checkpoint under ``checkpoints``, or None (start from the beginning). A checkpoint that a
    killed run left incomplete is removed and named in one line with the one resumed from."""
    procs = main_process()
    skipped = run_checkpoints.discard_incomplete(checkpoints) if procs.is_main_process else []
    procs.wait_for_everyone()
    last = run_checkpoints.newest_complete(checkpoints)
    resume = str(last) if last else None  # as the Trainer takes it
    start = f"continuing from {last.name}" if last else "starting from the beginning"
    if skipped:
        log.warning("--resume: skipped %s, left incomplete by a run stopped while writing it; %s.",
                    " and ".join(skipped), start)
    elif resume is None and procs.is_main_process:
        log.warning("--resume: no checkpoint under %s; starting from the beginning.", checkpoints)
    return resume


def check_answer_tokens(cfg: RunConfig, dataset: Any) -> None:
    """Refuse a run whose forget or retain examples all lose every answer token to ``--max-length`` (the prompt,
    system prompt included, fills it: the losses would be 0 and nothing trained); warn with the counts when some
    do. Training sets without questions (raw text) are not checked."""
    counts = getattr(dataset, "without_answer", None)
    if counts is None:
        return
    try:
        from jinja2 import TemplateError  # transformers renders chat templates with jinja2
    except ImportError:  # pragma: no cover - no chat templates without it
        TemplateError = ValueError  # noqa: N806
    try:
        empty = dict(zip(("forget", "retain"), counts()))
    except (TemplateError, TypeError, ValueError) as e:  # the chat template cannot render with these arguments
        raise UnlearningFailed(f"The training examples could not be built in the {cfg.prompt_format} format "
                               f"({type(e).__name__}: {e}); check --system-prompt and --chat-template-arg.") from None
    sizes = {"forget": len(dataset.forget), "retain": len(dataset.used_retain())}
    prompt = "the prompt (with --system-prompt)" if cfg.system_prompt else "the prompt"
    for part in ("forget", "retain"):
        if empty[part] == sizes[part]:
            raise UnlearningFailed(
                f"--max-length {cfg.max_length} leaves no answer token in any of the {sizes[part]} {part} examples: "
                f"{prompt} fills it, so nothing would be trained. Raise --max-length or shorten the prompt.")
    if any(empty.values()):
        log.warning("--max-length %d leaves no answer token in %d of %d forget and %d of %d retain examples (%s fills "
                    "it); they train on nothing. Raise --max-length or shorten the prompt.", cfg.max_length,
                    empty["forget"], sizes["forget"], empty["retain"], sizes["retain"], prompt)


def _sharded(trainer: Any) -> bool:
    """Whether the trainer's processes hold shards of the weights (FSDP, DeepSpeed ZeRO-3) rather than copies."""
    plugin = getattr(trainer.accelerator.state, "deepspeed_plugin", None)
    return bool(trainer.is_fsdp_enabled or (trainer.is_deepspeed_enabled and getattr(plugin, "zero_stage", 3) == 3))


def save_whole(trainer: Any, folder: Path) -> None:
    """The trained model (or LoRA adapter) saved whole in ``folder``, as one process saves it, by every process
    together: the shards gathered and the main process writing. Under FSDP accelerate gathers the full state dict
    here, whatever ``fsdp_state_dict_type`` (with ``SHARDED_STATE_DICT``, the periodic checkpoints written in parts,
    the ``Trainer`` saves no whole model); otherwise the ``Trainer`` saves it (gathering ZeRO-3's shards)."""
    if not trainer.is_fsdp_enabled:
        trainer.save_model(str(folder))
        return
    state = trainer.accelerator.get_state_dict(trainer.model)  # every process takes part; full on the main one
    model = trainer.accelerator.unwrap_model(trainer.model)
    # a tied weight (the output layer sharing the embeddings) comes back gathered as a copy of its own: keep the one
    # name one process saves
    aliases = ({n for n, _ in model.named_parameters(remove_duplicate=False)} -
               {n for n, _ in model.named_parameters()})
    if trainer.args.should_save:
        model.save_pretrained(str(folder), state_dict={k: v for k, v in state.items() if k not in aliases})


def _shared_last_checkpoint(cfg: RunConfig, fitted: Fitted, model: Any) -> bool:
    """Give the working folder the model files of the checkpoint the Trainer wrote at the last step, when ``model``
    is that step's model (not a LoRA merge, a method's final transformation, or an earlier step --select restored),
    so the last state is written once (:func:`unlearn_methods.run_checkpoints.share_last_checkpoint`)."""
    trainer, record = fitted.trainer, fitted.eval_record or {}
    if (trainer is None or model is not fitted.model or (cfg.lora and cfg.merge)
            or type(fitted.method).finalize is not UnlearnMethod.finalize
            or record.get("selected_step", trainer.state.global_step) != trainer.state.global_step):
        return False
    checkpoint = run_checkpoints.last_checkpoint(trainer)
    return checkpoint is not None and run_checkpoints.share_last_checkpoint(checkpoint, fitted.out)


def save(cfg: RunConfig, fitted: Fitted, final: Path,
         finish: Callable[[TrainedCheckpoint], None] | None = None) -> TrainedCheckpoint:
    """Save the fitted model in its working folder, call ``finish`` there, and publish the folder as ``final``."""
    procs = main_process()
    out, run, tokenizer, trainer = fitted.out, fitted.run, fitted.run.tokenizer, fitted.trainer
    model = fitted.method.finalize(run, fitted.model)
    if cfg.lora and cfg.merge and hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    if trainer is not None and model is fitted.model and (trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled):
        save_whole(trainer, out)  # every process: the shards are gathered; the main process writes
    elif procs.is_main_process and not _shared_last_checkpoint(cfg, fitted, model):
        run_checkpoints.remove_model_files(out)  # a resumed run's may be links into a checkpoint
        model.save_pretrained(str(out))
    trained = TrainedCheckpoint(out, fitted.method, fitted.adapter, fitted.data_dir, fitted.train_metrics,
                                fitted.eval_record)
    if procs.is_main_process:
        tokenizer.save_pretrained(str(out))
        if finish is not None:
            finish(trained)
        checkpoint_folder.publish(out, final)
    procs.wait_for_everyone()
    data_dir = fitted.data_dir
    if data_dir and Path(data_dir).is_relative_to(out):  # the demo corpus moved with the folder
        trained.data_dir = str(final / Path(data_dir).relative_to(out))
    trained.out = final
    return trained
