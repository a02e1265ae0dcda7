"""``unlearn run`` end to end: train (:func:`unlearn_methods.run.train`), evaluate the checkpoint with lm-eval
(``--eval-tasks``), write its model card, push it to the Hub (``--push-to-hub``)."""

from __future__ import annotations

import logging
from pathlib import Path

from harness_ext.evaluate import run_lm_eval
from harness_ext.results import task_metrics
from unlearn_app import model_card
from unlearn_methods.config import RunConfig
from unlearn_methods.run import TrainedCheckpoint, train

log = logging.getLogger(__name__)


def run_unlearning(cfg: RunConfig) -> Path:
    """Run ``cfg`` end to end; returns the checkpoint folder."""
    trained = train(cfg)
    eval_results = evaluate_checkpoint(cfg, trained) if cfg.eval_tasks else None
    card = model_card.render(cfg, trained.method.params.to_dict(), trained.method.summary, trained.train_metrics,
                             eval_results, trained.adapter)
    (trained.out / "README.md").write_text(card)
    if eval_results:
        write_model_index(trained.out)
    if cfg.push_to_hub:
        from unlearn_app.hub import push_folder

        log.info("Pushed to %s", push_folder(trained.out, cfg.push_to_hub, private=cfg.hub_private))
    return trained.out


def evaluate_checkpoint(cfg: RunConfig, trained: TrainedCheckpoint) -> dict[str, dict[str, float]]:
    """Evaluate the saved checkpoint with lm-eval; results go to ``out/eval`` and the model card."""
    out = trained.out
    extra = {"peft": str(out)} if trained.adapter else None
    model_dir = cfg.model if trained.adapter else out
    metadata = {**({"data_dir": trained.data_dir} if trained.data_dir else {}), **cfg.eval_metadata}
    res = run_lm_eval(model_dir, list(cfg.eval_tasks), out / "eval", metadata, extra_model_args=extra)
    return task_metrics(res)


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
