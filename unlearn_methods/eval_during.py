"""Evaluation during unlearning: a Trainer callback that runs lm-eval tasks on the live weights every so many
optimizer steps (and at step 0 and the last step), writes one JSON line per evaluation, and, given a selection
rule, keeps a copy of the best weights so far and puts them back at the end.

The rule (parsed by the application, :mod:`unlearn_app.selection`) is anything with ``text``, ``mode`` ("max" or
"min") and ``score(metrics) -> float``, optionally ``ineligible(metrics, step0_metrics) -> str | None`` (why a step
may not be chosen); a NaN score is never selected.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from transformers import TrainerCallback

from unlearn_methods.prompt_format import PLAIN, PromptFormat
from unlearn_tasks.dataset_loader import read_json_lines

log = logging.getLogger(__name__)

ROWS_FILE = "eval_during_training.jsonl"
PLOT_FILE = "eval_during_training.png"
BEST_DIR = "eval_best"  # the best weights so far while the run lasts (removed once they are the output)
_BEST_WEIGHTS = "weights.safetensors"  # the best step's weights, and in its metadata the step (one file: never apart)
_SELECTED = "selected"

Metrics = dict[str, dict[str, float]]


class SelectionRule(Protocol):
    text: str
    mode: str

    def score(self, metrics: Metrics) -> float: ...


class EvalDuringTrainingError(RuntimeError):
    """An evaluation during training failed or its results do not fit the selection rule; the message says why."""


@dataclass
class Selected:
    """The evaluated step whose weights are the output."""

    step: int
    epoch: float
    value: float
    rule: str


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The rows of an ``eval_during_training.jsonl`` file (``null`` values read as NaN)."""
    return [{k: (math.nan if v is None else v) for k, v in line.value.items()} for line in read_json_lines(path)]


def _finite_or_none(v: float) -> float | None:
    return v if isinstance(v, (int, float)) and math.isfinite(v) else None


class _RngState:
    """Save and restore every random generator, so evaluating never changes the training that follows."""

    def __enter__(self) -> _RngState:
        self.states = (random.getstate(), np.random.get_state(), torch.get_rng_state(),
                       torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)
        return self

    def __exit__(self, *exc: Any) -> None:
        py, np_state, cpu, cuda = self.states
        random.setstate(py)
        np.random.set_state(np_state)
        torch.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


class EvalDuringTraining(TrainerCallback):
    """Evaluate at step 0, every ``every`` optimizer steps and at the last step.

    ``evaluate(model)`` returns ``{task: {metric: value}}`` for the model as it is (the default, built by
    :func:`lm_eval_evaluator`, runs lm-eval in process); it is called in eval mode under ``torch.no_grad`` and the
    model's train mode and the random generators are restored afterwards. Rows go to ``out/eval_during_training.jsonl``,
    appended and flushed one by one, so an interrupted run keeps them.

    Under a launcher (``accelerate launch``) the main process evaluates its copy of the weights (under DDP every
    process holds the same) and writes, while the others wait for it: the numbers are those of one process.
    """

    def __init__(self, evaluate: Callable[[Any], Metrics], every: int, out: str | Path,
                 rule: SelectionRule | None = None, on_row: Callable[[dict[str, Any]], None] | None = None) -> None:
        if every <= 0:
            raise ValueError(f"--eval-every must be a positive number of steps, got {every}.")
        self.evaluate, self.every, self.rule = evaluate, every, rule
        self.on_row = on_row  # called with every row once it is on disk (the sweep's Ray Tune trials report it)
        self.out = Path(out)
        self.rows_path = self.out / ROWS_FILE
        self.best_dir = self.out / BEST_DIR
        self.best: Selected | None = None
        self.evaluated: set[int] = set()
        self.nan_steps: list[int] = []
        self.ineligible_steps: list[int] = []
        self.start_metrics: Metrics | None = None  # the first evaluation (step 0): ``baseline`` of --select-if

    # ------------------------------------------------------------------ Trainer hooks
    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.evaluated = _once(lambda: self._start(state.global_step))
        if state.global_step not in self.evaluated:
            self._evaluate(model, state)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.every == 0 and state.global_step not in self.evaluated:
            self._evaluate(model, state)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        if state.global_step not in self.evaluated:
            self._evaluate(model, state)

    # ------------------------------------------------------------------ rows and the best copy
    def _start(self, step: int) -> set[int]:
        """A fresh run starts a new file; a resumed one keeps the rows (and best copy) up to the step it resumes.
        Returns the steps already evaluated."""
        self.out.mkdir(parents=True, exist_ok=True)
        kept = [r for r in read_rows(self.rows_path) if r["step"] <= step] if self.rows_path.is_file() and step else []
        staged = self.rows_path.with_name(f".{self.rows_path.name}.writing")  # replaced at once: a kill keeps the old
        with staged.open("w") as f:
            for row in kept:
                f.write(json.dumps({k: _finite_or_none(v) if isinstance(v, float) else v for k, v in row.items()}) + "\n")
        os.replace(staged, self.rows_path)
        self.evaluated = {int(r["step"]) for r in kept}
        if kept and kept[0]["step"] == 0:
            self.start_metrics = {}
            for key, value in kept[0].items():
                if "/" in key:
                    task, metric = key.split("/", 1)
                    self.start_metrics.setdefault(task, {})[metric] = value
        best = _saved_best(self.best_dir / _BEST_WEIGHTS) if step and self.rule is not None else None
        if best is not None and best.step <= step and best.rule == self.rule.text:
            self.best = best
        if self.best is None and self.best_dir.exists():
            shutil.rmtree(self.best_dir)
        if self.rule is not None and self.best is None and kept:
            log.warning("--resume: the weights of the steps evaluated before step %d were not kept, so --select %s "
                        "chooses among the steps evaluated from now on.", step, self.rule.text)
        return self.evaluated

    def _evaluate(self, model, state) -> None:
        """Evaluate on the main process (the weights are the same on every process); the others wait for it."""
        _once(lambda: self._evaluate_here(model, state))
        self.evaluated.add(state.global_step)

    def _evaluate_here(self, model, state) -> None:
        step, epoch = state.global_step, round(float(state.epoch or 0.0), 4)
        was_training = model.training
        started = time.perf_counter()
        model.eval()
        try:
            with torch.no_grad(), _RngState():
                metrics = self.evaluate(model)
        except Exception as e:  # lm-eval and the backends raise many types; say where it happened
            raise EvalDuringTrainingError(f"The evaluation at step {step} failed: {type(e).__name__}: {e}") from e
        finally:
            model.train(was_training)
        row: dict[str, Any] = {"step": step, "epoch": epoch}
        row.update({f"{task}/{name}": value for task, values in metrics.items() for name, value in values.items()})
        with self.rows_path.open("a") as f:
            f.write(json.dumps({k: _finite_or_none(v) if isinstance(v, float) else v for k, v in row.items()}) + "\n")
            f.flush()
        self.evaluated.add(step)
        shown = ", ".join(f"{k} {v:.4g}" for k, v in row.items() if k not in ("step", "epoch"))
        log.info("eval at step %d (epoch %.2f, %.1f s): %s", step, epoch, time.perf_counter() - started, shown)
        if self.start_metrics is None:
            self.start_metrics = metrics
        if self.rule is not None:
            self._consider(model, step, epoch, metrics)
        if self.on_row is not None:
            self.on_row(row)

    def _consider(self, model, step: int, epoch: float, metrics: Metrics) -> None:
        ineligible = getattr(self.rule, "ineligible", None)
        try:
            value = float(self.rule.score(metrics))
            reason = ineligible(metrics, self.start_metrics or metrics) if ineligible else None
        except (LookupError, ValueError, ZeroDivisionError) as e:
            raise EvalDuringTrainingError(f"--select {self.rule.text}: {e}") from None
        if reason:
            self.ineligible_steps.append(step)
            log.warning("--select-if: step %d cannot be selected (%s).", step, reason)
            return
        if math.isnan(value):
            self.nan_steps.append(step)
            log.warning("--select %s is NaN at step %d: this step cannot be selected.", self.rule.text, step)
            return
        better = self.best is None or (value > self.best.value if self.rule.mode == "max" else value < self.best.value)
        if better:
            self.best = Selected(step, epoch, value, self.rule.text)
            self._save_best(model)

    def _trainable(self, model) -> dict[str, torch.Tensor]:
        return {n: p for n, p in model.named_parameters() if p.requires_grad}

    def _save_best(self, model) -> None:
        from safetensors.torch import save_file

        self.best_dir.mkdir(parents=True, exist_ok=True)
        tensors = {n: p.detach().to("cpu", copy=True).contiguous() for n, p in self._trainable(model).items()}
        tmp = self.best_dir / (_BEST_WEIGHTS + ".tmp")
        save_file(tensors, str(tmp), metadata={_SELECTED: json.dumps(self.best.__dict__)})
        tmp.replace(self.best_dir / _BEST_WEIGHTS)  # the weights with their step, or the earlier pair: never half

    # ------------------------------------------------------------------ the end of the run
    def restore_best(self, model, final_step: int) -> Selected | None:
        """Put the selected step's weights into ``model`` (nothing to do when it is the last step); remove the
        copy. Returns the selected step, or None when no evaluated step had a finite score. Under a launcher, in the
        main process's model (the one that writes the checkpoint); every process gets the selected step."""
        if self.rule is None:
            return None
        return _once(lambda: self._restore_best(model, final_step))

    def _restore_best(self, model, final_step: int) -> Selected | None:
        if self.best is None and self.ineligible_steps:
            log.warning("--select %s: no evaluated step passed --select-if (steps %s failed); keeping the last "
                        "weights (step %d).", self.rule.text, ", ".join(map(str, self.ineligible_steps)), final_step)
        elif self.best is None and not self.nan_steps:
            log.warning("--select %s: no step was evaluated since the resume; keeping the last weights (step %d).",
                        self.rule.text, final_step)
        elif self.best is None:
            log.warning("--select %s was NaN at every evaluated step (%s): keeping the last weights (step %d). "
                        "Forget Quality and PrivLeak need a reference run (eval_metadata: {reference: DIR}).",
                        self.rule.text, ", ".join(map(str, self.nan_steps)), final_step)
        elif self.best.step != final_step:
            from safetensors.torch import load_file

            saved = load_file(str(self.best_dir / _BEST_WEIGHTS))
            params = self._trainable(model)
            missing = sorted(set(params) - set(saved))
            if missing:
                raise EvalDuringTrainingError(f"The saved copy of step {self.best.step} lacks {missing[:3]}; "
                                              f"the last weights were kept in the model.")
            with torch.no_grad():
                for name, param in params.items():
                    param.copy_(saved[name].to(param.device, param.dtype))
        if self.nan_steps and self.best is not None:
            log.warning("--select %s was NaN at step(s) %s; those steps were never selected.", self.rule.text,
                        ", ".join(map(str, self.nan_steps)))
        shutil.rmtree(self.best_dir, ignore_errors=True)
        return self.best


def _saved_best(weights: Path) -> Selected | None:
    """The step whose weights ``weights`` (the best copy) holds, from its metadata; None without a readable copy."""
    from safetensors import SafetensorError, safe_open

    if not weights.is_file():
        return None
    try:
        with safe_open(str(weights), "pt") as f:
            selected = (f.metadata() or {}).get(_SELECTED)
    except (OSError, SafetensorError):
        return None
    return Selected(**json.loads(selected)) if selected else None


def _once(work: Callable[[], Any]) -> Any:
    """``work()`` on the main process of a launch (every process gets its result), directly without one; an error
    there (an evaluation that failed, a rows file that cannot be written) stops every process as
    :class:`EvalDuringTrainingError` with the same message."""
    from unlearn_methods.processes import MainProcessError, on_main_process

    try:
        return on_main_process(work, errors=(Exception,))
    except MainProcessError as e:
        raise EvalDuringTrainingError(str(e)) from None


def lm_eval_evaluator(tokenizer: Any, tasks: list[str], metadata: dict[str, Any] | None = None,
                      limit: int | None = None, batch_size: int = 16,
                      prompt: PromptFormat = PLAIN) -> Callable[[Any], Metrics]:
    """``evaluate(model)`` running lm-eval's ``tasks`` on the model in memory (lm-eval's ``hf`` backend), in the
    run's prompt format (chat: ``--apply_chat_template`` with its system instruction and template arguments)."""
    from harness_ext.evaluate import evaluate_lm, live_hf_lm
    from harness_ext.results import task_metrics

    def evaluate(model: Any) -> Metrics:
        lm = live_hf_lm(model, tokenizer, batch_size=batch_size, **prompt.lm_eval_model_args())
        return task_metrics(evaluate_lm(lm, list(tasks), metadata=metadata, limit=limit, batch_size=batch_size,
                                        apply_chat_template=prompt.chat, system_instruction=prompt.system_prompt))

    return evaluate
