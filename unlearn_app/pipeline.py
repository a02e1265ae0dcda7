"""``unlearn run`` end to end: train (:func:`unlearn_methods.training.train`), evaluate the checkpoint with lm-eval
(``--eval-tasks``), write its model card, push it to the Hub (``--push-to-hub``)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness_ext.evaluate import run_lm_eval, unknown_tasks
from harness_ext.results import task_metrics
from unlearn_app.checkpoint import model_card
from unlearn_app.checkpoint.model_card import run_prompt_format
from unlearn_app.output_guard import write_text
from unlearn_app.selection import Selection, SelectionError, parse_select
from unlearn_methods.config import RunConfig
from unlearn_methods.eval_during import PLOT_FILE, ROWS_FILE, read_rows
from unlearn_methods.training import TrainedCheckpoint, main_process, train

log = logging.getLogger(__name__)


def run_unlearning(cfg: RunConfig, on_row: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """Run ``cfg`` end to end; returns the checkpoint folder. The model card (and the plot of ``--eval-every``) are
    written before the folder is renamed into place; ``--eval-tasks`` then evaluate it and add their results to the
    card. ``on_row``: called with every row of the evaluation during unlearning as it is written."""
    cfg.validate()
    selection = check_evaluation(cfg)

    def finish(trained: TrainedCheckpoint) -> None:  # in OUT.partial, before it becomes OUT
        if trained.eval_during_training:
            plot_eval_during_training(trained.out, trained.eval_during_training.get("selected_step"), cfg.select)
        write_card(cfg, trained)

    trained = train(cfg, select=selection, finish=finish, on_row=on_row)
    procs = main_process()  # under a launcher: every process evaluates its share, the main one writes and pushes
    if cfg.eval_tasks:
        eval_results = evaluate_checkpoint(cfg, trained)
        if procs.is_main_process:
            write_card(cfg, trained, eval_results)
            if eval_results:
                write_model_index(trained.out)
    if cfg.push_to_hub and procs.is_main_process:
        from unlearn_app.checkpoint.hub import push_folder

        log.info("Pushed to %s", push_folder(trained.out, cfg.push_to_hub, private=cfg.hub_private))
    procs.wait_for_everyone()
    return trained.out


def write_card(cfg: RunConfig, trained: TrainedCheckpoint,
               eval_results: dict[str, dict[str, float]] | None = None) -> None:
    """The checkpoint's model card, ``README.md`` (written whole or not at all)."""
    card = model_card.render(cfg, trained.method.params.to_dict(), trained.method.summary, trained.train_metrics,
                             eval_results, trained.adapter, trained.eval_during_training)
    write_text(trained.out / "README.md", card)


def evaluate_checkpoint(cfg: RunConfig, trained: TrainedCheckpoint) -> dict[str, dict[str, float]]:
    """Evaluate the saved checkpoint with lm-eval; results go to ``out/eval`` and the model card."""
    out = trained.out
    extra = {"peft": str(out)} if trained.adapter else None
    model_dir = cfg.model if trained.adapter else out
    metadata = {**({"data_dir": trained.data_dir} if trained.data_dir else {}), **cfg.source.eval_metadata(cfg),
                **cfg.eval_metadata}
    prompt = run_prompt_format(cfg)  # evaluated the way it was trained
    extra = {**(extra or {}), **prompt.lm_eval_model_args()} or None
    res = run_lm_eval(model_dir, list(cfg.eval_tasks), out / "eval", metadata, backend=cfg.source.eval_model,
                      extra_model_args=extra, limit=cfg.eval_limit, apply_chat_template=prompt.chat,
                      system_instruction=prompt.system_prompt)
    return task_metrics(res) if res is not None else {}  # None on the other processes of a launch


def check_evaluation(cfg: RunConfig) -> Selection | None:
    """Before anything is trained: the ``--eval-tasks`` are tasks lm-eval knows, and ``--select`` parses and names
    known tasks (whether the task reports the metric is checked at the step-0 evaluation, before any training
    step). Returns the parsed ``--select`` rule."""
    if not cfg.eval_tasks:
        return None
    selection = parse_select(cfg.select, cfg.select_if) if cfg.select else None
    unknown = unknown_tasks(list(cfg.eval_tasks) + (selection.tasks if selection else []))
    bad = [t for t in cfg.eval_tasks if t in unknown]
    if bad:
        raise ValueError(f"--eval-tasks: unknown task(s) {', '.join(bad)}; `lm-eval ls tasks` lists them.")
    if selection and unknown:
        raise SelectionError(f"--select {selection.text}: unknown task(s) {', '.join(unknown)}; name a task of "
                             f"--eval-tasks ({', '.join(cfg.eval_tasks)}) as TASK/METRIC.")
    return selection


def plot_eval_during_training(out: Path, selected_step: int | None = None, rule: str | None = None) -> Path | None:
    """``out/eval_during_training.png`` from the rows file: each metric against the step, the selected step marked."""
    from unlearn_app.reports.plots import metrics_vs_step

    rows = read_rows(out / ROWS_FILE) if (out / ROWS_FILE).is_file() else []
    if not rows:
        return None
    title = "Evaluation during unlearning" + (f" (selected: step {selected_step}, {rule})" if rule else "")
    return metrics_vs_step(rows, out / PLOT_FILE, title, selected_step if rule else None)


def write_model_index(folder: Path, name: str | None = None) -> bool:
    """Add the newest lm-eval results under ``folder/eval`` to the folder's model card as Hub ``model-index``
    evaluation results. Returns False when the folder holds no evaluation."""
    import json

    from harness_ext.results import latest_results_file

    try:
        raw = json.loads(latest_results_file(Path(folder) / "eval").read_text())
    except FileNotFoundError:
        return False
    model_card.update_card_eval_results(str(folder), raw, name or Path(folder).name)
    return True
