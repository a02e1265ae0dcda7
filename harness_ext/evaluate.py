"""Run lm-eval on a model from Python the way the ``lm_eval`` command does, and save its results files.

Under a launcher (``accelerate launch -m unlearn_app ...``) every process runs the evaluation and scores its share of
the requests; lm-eval returns the results on the main process only, which writes the outputs
(:func:`is_main_process`)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def model_arguments(model_dir: str | Path, backend: str = "hf", extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The lm-eval model arguments :func:`run_lm_eval` passes (lm-eval copies them into every task's metadata, so
    tasks built ahead of the run get ``{**model_arguments(...), **metadata}``)."""
    model_args: dict[str, Any] = {"pretrained": str(model_dir), "dtype": "float32"}
    if backend == "vllm":
        model_args.update({"max_model_len": 512, "enforce_eager": True, "seed": 1234})
    model_args.update(extra or {})
    return model_args


def is_main_process() -> bool:
    """Whether this process writes a command's outputs: always when it runs alone, else when it is the main process
    of an ``accelerate launch`` / ``torchrun`` launch (accelerate's ``PartialState``; without a ``WORLD_SIZE`` above 1
    nothing distributed is imported)."""
    if int(os.environ.get("WORLD_SIZE", "1") or 1) <= 1:
        return True
    import torch
    from accelerate import PartialState

    return PartialState(cpu=not torch.cuda.is_available()).is_main_process  # processes on CPUs meet over gloo


def default_device(backend: str = "hf") -> str | None:
    """The device lm-eval's ``hf`` backends get when none is given: ``cuda`` (the first visible GPU, so a process
    pinned to a GPU by ``CUDA_VISIBLE_DEVICES`` evaluates on its own) when torch sees one, else ``cpu``; other
    backends choose their own (None)."""
    if backend not in ("hf", "hf-multimodal"):
        return None
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def run_lm_eval(
    model_dir: str | Path,
    tasks: list[Any],
    output_dir: str | Path,
    metadata: dict[str, Any] | None = None,
    backend: str = "hf",
    batch_size: int | str = 16,
    device: str | None = None,
    limit: int | None = None,
    extra_model_args: dict[str, Any] | None = None,
    gen_kwargs: str | None = None,
    log_samples: bool = False,
    apply_chat_template: bool = False,
    system_instruction: str | None = None,
) -> dict:
    """Evaluate ``model_dir`` on ``tasks`` with lm-eval; write ``results_*.json`` under ``output_dir``.

    ``tasks``: names, or task / group objects already built (with the metadata lm-eval would give them, see
    :func:`model_arguments`), which lm-eval then evaluates without building them again.
    ``device``: default :func:`default_device` (``cuda`` when a GPU is visible, else ``cpu``).
    ``apply_chat_template`` / ``system_instruction``: lm-eval's ``--apply_chat_template`` and ``--system_instruction``
    (the chat template's keyword arguments, e.g. ``date_string``, go in ``extra_model_args["chat_template_args"]``).
    Returns lm-eval's results dictionary (with the per-document ``samples`` when ``log_samples``, also written to
    ``samples_<task>_<date>.jsonl`` beside the results file, as ``lm_eval --log_samples`` does); None on the other
    processes of a multi-process launch (``accelerate launch``), which score their share of the requests. Only this package's
    tasks and the lm-eval tasks named are indexed, once per process (:mod:`harness_ext.task_index`).
    """
    model_args = model_arguments(model_dir, backend, extra_model_args)
    metadata = {**model_args, **(metadata or {})}
    return evaluate_lm(backend, tasks, output_dir, metadata, model_args=model_args, batch_size=batch_size,
                       device=device or default_device(backend), limit=limit,
                       gen_kwargs=gen_kwargs, log_samples=log_samples, apply_chat_template=apply_chat_template,
                       system_instruction=system_instruction)


def evaluate_lm(
    lm: Any,
    tasks: list[Any],
    output_dir: str | Path | None = None,
    metadata: dict[str, Any] | None = None,
    model_args: dict[str, Any] | None = None,
    batch_size: int | str = 16,
    device: str | None = None,
    limit: int | None = None,
    gen_kwargs: str | None = None,
    log_samples: bool = False,
    apply_chat_template: bool = False,
    system_instruction: str | None = None,
) -> dict:
    """lm-eval's ``simple_evaluate`` on ``lm``: a backend name (with ``model_args``) or an lm-eval ``LM`` object
    (see :func:`live_hf_lm`). Writes ``results_*.json`` under ``output_dir`` when given; returns the results.
    ``apply_chat_template`` / ``system_instruction``: lm-eval's ``--apply_chat_template`` /
    ``--system_instruction``."""
    from lm_eval import simple_evaluate
    from lm_eval.loggers import EvaluationTracker

    from harness_ext.lm_eval_patches import cache_env_info
    from harness_ext.task_index import task_manager

    cache_env_info()  # lm-eval's environment report takes seconds; it is the same for every evaluation of a process
    tracker = EvaluationTracker(output_path=str(output_dir)) if output_dir is not None else None
    results = simple_evaluate(
        model=lm,
        model_args=model_args,
        tasks=tasks,
        batch_size=batch_size,
        device=device,
        task_manager=task_manager(tasks, metadata or {}),
        bootstrap_iters=0,
        limit=limit,
        gen_kwargs=gen_kwargs,
        log_samples=log_samples,
        evaluation_tracker=tracker,
        apply_chat_template=apply_chat_template,
        system_instruction=system_instruction,
    )
    if tracker is not None and results is not None:  # under a launcher, lm-eval returns them on the main process only
        save_results(tracker, results)
    return results


def save_results(tracker: Any, results: dict) -> None:
    """Write ``results`` as the ``lm_eval`` command does (lm-eval 0.4.13's ``_cli/run.py``): ``results_<date>.json``
    (without the per-document samples, with their hashes), and with ``log_samples`` one
    ``samples_<task>_<date>.jsonl`` per task beside it (lm-eval's ``EvaluationTracker.save_results_samples``, which
    rewrites each record's arguments and responses as strings; it gets copies, so ``results["samples"]`` stays as
    lm-eval returned it)."""
    samples = results.pop("samples", None)
    try:
        tracker.save_results_aggregated(results=results, samples=samples)
        for task in results["configs"] if samples else ():
            tracker.save_results_samples(task_name=task, samples=[dict(sample) for sample in samples[task]])
    finally:
        if samples is not None:
            results["samples"] = samples


def live_hf_lm(model: Any, tokenizer: Any, batch_size: int = 16, **model_args: Any) -> Any:
    """lm-eval's ``hf`` backend around a model already in memory (a ``PreTrainedModel`` or a PEFT model) and its
    tokenizer, so the current weights are evaluated without saving or reloading them; ``model_args``: further
    arguments of the backend (e.g. ``chat_template_args``)."""
    from lm_eval.models.huggingface import HFLM

    quiet = logging.getLogger("lm_eval.models.huggingface")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its "pretrained is not a str" warning is expected here
    try:
        return HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size, **model_args)
    finally:
        quiet.setLevel(level)


def unknown_tasks(tasks: list[str]) -> list[str]:
    """The names in ``tasks`` that are neither a task, a group nor a tag of this package or of lm-eval."""
    from harness_ext.task_index import unknown_tasks as unknown

    return unknown(tasks)
