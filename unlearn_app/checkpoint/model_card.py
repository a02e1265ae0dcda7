"""The model card (README.md) written next to every unlearned checkpoint."""

from __future__ import annotations

import functools
import json
import math
import os
import platform
import shlex
from importlib import metadata
from typing import Any

from unlearn_app.reports.numbers import format_number
from unlearn_methods.config import RunConfig, option_name, run_fields
from unlearn_methods.prompt_format import PLAIN, PromptFormat, prompt_format_of

LIBRARIES = ("lm-eval-unlearning", "torch", "transformers", "peft", "lm-eval", "datasets")


def library_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def model_label(model: str) -> tuple[str | None, str]:
    """(Hub id for ``base_model`` or None for a local folder, the name to show): a local folder is shown by its
    name only, so the card never carries this machine's absolute paths."""
    if os.path.exists(os.path.expanduser(model)):
        return None, os.path.basename(os.path.normpath(model)) or model
    return model, model


def local_inputs(cfg: RunConfig) -> list[tuple[str, str, str]]:
    """(option, name, sha256) of every local file or folder the run names (model, data folder, refusal answers,
    BLUR references, RWKU files): the card names them so, never by this machine's paths. A folder's hash is over its
    files' relative names and contents; a model folder's leaves out what does not change its weights, as `unlearn
    ci` keys a model (``unlearn_app.ci.cache.model_key``)."""
    out = []
    for f in run_fields():
        value = getattr(cfg, f.name, None)
        if not f.metadata["path"] or f.name == "out" or not isinstance(value, str) or not value:
            continue
        path = os.path.expanduser(value)
        if os.path.exists(path):
            out.append((option_name(f), os.path.basename(os.path.normpath(path)) or value,
                        _fingerprint(os.path.realpath(path), f.name == "model")))
    return out


@functools.lru_cache(maxsize=16)
def _fingerprint(path: str, model: bool) -> str:
    """sha256 of a local input (once per process: the card is written twice in a run; each file's hash remembered
    across runs by size and modification time, so a run does not read its base model's weights again)."""
    from harness_ext.provenance import path_fingerprint
    from unlearn_app.ci.cache import SKIP_IN_MODEL_HASH

    return path_fingerprint(path, skip=SKIP_IN_MODEL_HASH if model else (), cached=True)


def run_prompt_format(cfg: RunConfig) -> PromptFormat:
    """The run's prompt format (plain while ``auto`` is unresolved, i.e. before training)."""
    return PLAIN if cfg.prompt_format == "auto" else prompt_format_of(cfg)


def evaluation_model_args(hub_id: str | None, adapter: bool, prompt: PromptFormat) -> str:
    """lm_eval's ``--model_args`` for the checkpoint: ``key=value`` pairs, or a quoted JSON object when the chat
    template takes keyword arguments (lm-eval's ``chat_template_args``)."""
    args = {"pretrained": hub_id or "BASE_MODEL", "peft": "THIS_REPO"} if adapter else {"pretrained": "THIS_REPO"}
    extra = prompt.lm_eval_model_args()
    if extra:
        return shlex.quote(json.dumps({**args, **extra}))
    return ",".join(f"{k}={v}" for k, v in args.items())


def render(cfg: RunConfig, method_params: dict[str, Any], summary: str, train_metrics: dict[str, Any],
           eval_results: dict[str, dict[str, float]] | None = None, adapter: bool = False,
           eval_during_training: dict[str, Any] | None = None) -> str:
    """Markdown with YAML front matter (read by the Hub) describing how the checkpoint was made."""
    hub_id, shown = model_label(cfg.model)
    tags = ["unlearning", "lm-eval-unlearning", f"unlearning-{cfg.method}", cfg.forget]
    front = ["---", *([f"base_model: {hub_id}"] if hub_id else []),
             f"library_name: {'peft' if adapter else 'transformers'}", "tags:"]
    front += [f"- {t}" for t in tags] + ["---", ""]
    hp = {"method": cfg.method, **{f"method.{k}": v for k, v in method_params.items()},
          "forget split": cfg.forget, "retain split": cfg.retain, "data": cfg.dataset,
          "fine-tuning": f"LoRA (r={cfg.lora_r}, alpha={cfg.lora_alpha}, targets={cfg.lora_target_modules})"
          + (", merged" if cfg.merge else "") if cfg.lora else "full",
          "L1 on LoRA weights": cfg.l1_lora, "epochs": cfg.epochs, "learning rate": cfg.lr,
          "batch size": cfg.batch_size, "gradient accumulation": cfg.grad_accum, "seed": cfg.seed}
    prompt = run_prompt_format(cfg)
    hp["prompt format"] = prompt.describe()
    backend, evaluation = cfg.source.eval_model, cfg.source.evaluation(cfg)
    model_args = evaluation_model_args(hub_id, adapter, prompt)
    if prompt.lm_eval_flags():
        evaluation += " " + prompt.lm_eval_flags()
    if cfg.source.vision:
        hp["modality"] = cfg.modality
    body = [
        f"# {shown} unlearned with {cfg.method} on {cfg.forget}",
        *([] if hub_id else ["", f"Base model: the local model `{shown}` (replace BASE_MODEL below with its Hub id or folder)."]),
        "",
        f"Made with [lm-eval-unlearning](https://pypi.org/project/lm-eval-unlearning/): {summary}",
        "",
        "## How to evaluate",
        "",
        "```bash",
        f"lm_eval --model {backend} --model_args {model_args} {evaluation}",
        "```",
        "",
        "## Hyperparameters",
        "",
        "| setting | value |",
        "|---|---|",
        *[f"| {k} | {format_number(v)} |" for k, v in hp.items()],
        "",
        "## Training",
        "",
        "| metric | value |",
        "|---|---|",
        *[f"| {k} | {format_number(v)} |" for k, v in train_metrics.items() if isinstance(v, (int, float))],
        "",
    ]
    inputs = local_inputs(cfg)
    if inputs:
        body += ["## Local inputs", "",
                 "Files of the machine the run was made on, by name and sha256 of their contents (of a folder: of its "
                 "files' relative names and contents):", "", "| option | name | sha256 |", "|---|---|---|"]
        body += [f"| {option} | `{name}` | `{digest}` |" for option, name, digest in inputs] + [""]
    if eval_during_training:
        body += _selection_section(eval_during_training)
    if eval_results:
        body += ["## Evaluation", ""]
        for task, metrics in eval_results.items():
            body += [f"### {task}", "", "| metric | value |", "|---|---|"]
            body += [f"| {k} | {format_number(v)} |" for k, v in metrics.items()] + [""]
    body += ["## Library versions", "", "| library | version |", "|---|---|"]
    body += [f"| {k} | {v} |" for k, v in library_versions().items()] + [""]
    return "\n".join(front + body)


def _selection_section(record: dict[str, Any]) -> list[str]:
    """The "Evaluation during unlearning" section: how often, which file, and which step's weights these are."""
    tasks = ", ".join(record.get("tasks") or [])
    lines = ["## Evaluation during unlearning", "",
             f"{tasks} evaluated every {record.get('every')} optimizer steps (and at steps 0 and "
             f"{record.get('final_step')}); one row per evaluation in `{record.get('file')}`.", ""]
    if record.get("select"):
        step, value = record.get("selected_step"), record.get("selected_value")
        if record.get("select_if"):
            lines += ["Steps eligible for selection passed: " + ", ".join(f"`{c}`" for c in record["select_if"])
                      + " (baseline: step 0).", ""]
        if value is None:
            lines += [f"**Selected checkpoint:** step {step}, the last one: `{record['select']}` was NaN at every "
                      "evaluated step, so no step could be selected.", ""]
        else:
            which = ("the last step's" if step == record.get("final_step")
                     else f"that step's, not the last step's ({record.get('final_step')})")
            lines += [f"**Selected checkpoint: step {step}** (epoch {format_number(record.get('selected_epoch'))}), by "
                      f"`{record['select']}` (value {format_number(value)}). These weights are {which}.", ""]
    return lines


# --------------------------------------------------------------------------- Hub model-index evaluation results
def eval_results_entries(results: dict[str, Any], model_name: str) -> list:
    """huggingface_hub ``EvalResult`` objects for every finite metric of an lm-eval results dictionary.

    The dataset of each task is the first data source its provenance names (``configs.<task>.provenance``), with
    its revision when it came from the Hub.
    """
    from huggingface_hub import EvalResult

    from harness_ext.results import task_metrics

    configs = results.get("configs") or {}
    entries = []
    for task, metrics in task_metrics(results).items():
        prov = (configs.get(task) or {}).get("provenance") or {}
        data = (prov.get("data") or [{}])[0]
        dataset = data.get("source") or task
        for metric, value in metrics.items():
            if not math.isfinite(value):
                continue
            entries.append(EvalResult(
                task_type="text-generation", task_name=f"{task} (lm-eval-unlearning)", dataset_type=dataset,
                dataset_name=f"{dataset} ({task})", dataset_revision=data.get("revision"), metric_type=metric,
                metric_name=metric, metric_value=round(float(value), 6), source_name="lm-eval-unlearning",
                source_url="https://pypi.org/project/lm-eval-unlearning/",
            ))
    return entries


def update_card_eval_results(card_path_or_repo: str, results: dict[str, Any], model_name: str) -> Any:
    """Write lm-eval results as the card's ``model-index`` (replacing earlier lm-eval-unlearning entries).

    ``card_path_or_repo`` is a local model folder (its README.md is created or updated) or a Hub repo id (the
    card is read from and pushed back to the Hub). Returns the card.
    """
    from pathlib import Path

    from huggingface_hub import ModelCard, ModelCardData

    folder = Path(card_path_or_repo).expanduser()
    local = folder.is_dir()
    if local:
        readme = folder / "README.md"
        card = ModelCard(readme.read_text(encoding="utf-8")) if readme.is_file() else ModelCard(
            f"---\n{ModelCardData().to_yaml()}\n---\n\n# {model_name}\n")
    else:
        card = ModelCard.load(card_path_or_repo)
    kept = [r for r in (card.data.eval_results or []) if r.source_name != "lm-eval-unlearning"]
    card.data.eval_results = kept + eval_results_entries(results, model_name)
    card.data.model_name = card.data.model_name or model_name
    if local:
        card.save(str(folder / "README.md"))
    else:
        card.push_to_hub(card_path_or_repo, commit_message="Evaluation results (lm-eval-unlearning)")
    return card
