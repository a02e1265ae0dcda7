"""The model card (README.md) written next to every unlearned checkpoint."""

from __future__ import annotations

import math
import platform
from importlib import metadata
from typing import Any

from unlearn_methods.config import RunConfig

LIBRARIES = ("lm-eval-unlearning", "torch", "transformers", "peft", "lm-eval", "datasets")


def library_versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return "n/a" if math.isnan(v) else f"{v:.4g}"
    return str(v)


def render(cfg: RunConfig, method_params: dict[str, Any], summary: str, train_metrics: dict[str, Any],
           eval_results: dict[str, dict[str, float]] | None = None, adapter: bool = False) -> str:
    """Markdown with YAML front matter (read by the Hub) describing how the checkpoint was made."""
    tags = ["unlearning", "lm-eval-unlearning", f"unlearning-{cfg.method}", cfg.forget]
    front = ["---", f"base_model: {cfg.model}", f"library_name: {'peft' if adapter else 'transformers'}", "tags:"]
    front += [f"- {t}" for t in tags] + ["---", ""]
    hp = {"method": cfg.method, **{f"method.{k}": v for k, v in method_params.items()},
          "forget split": cfg.forget, "retain split": cfg.retain, "data": cfg.dataset,
          "fine-tuning": f"LoRA (r={cfg.lora_r}, alpha={cfg.lora_alpha}, targets={cfg.lora_target_modules})"
          + (", merged" if cfg.merge else "") if cfg.lora else "full",
          "L1 on LoRA weights": cfg.l1_lora, "epochs": cfg.epochs, "learning rate": cfg.lr,
          "batch size": cfg.batch_size, "gradient accumulation": cfg.grad_accum, "seed": cfg.seed}
    backend, bench = ("hf-multimodal", "clear") if cfg.data == "clear" else ("hf", "tofu")
    if cfg.data == "clear":
        hp["modality"] = cfg.modality
    body = [
        f"# {cfg.model} unlearned with {cfg.method} on {cfg.forget}",
        "",
        f"Made with [lm-eval-unlearning](https://pypi.org/project/lm-eval-unlearning/): {summary}",
        "",
        "## How to evaluate",
        "",
        "```bash",
        (f"lm_eval --model {backend} --model_args pretrained={cfg.model},peft=THIS_REPO --tasks {bench}_{cfg.forget}"
         if adapter else f"lm_eval --model {backend} --model_args pretrained=THIS_REPO --tasks {bench}_{cfg.forget}"),
        "```",
        "",
        "## Hyperparameters",
        "",
        "| setting | value |",
        "|---|---|",
        *[f"| {k} | {_fmt(v)} |" for k, v in hp.items()],
        "",
        "## Training",
        "",
        "| metric | value |",
        "|---|---|",
        *[f"| {k} | {_fmt(v)} |" for k, v in train_metrics.items() if isinstance(v, (int, float))],
        "",
    ]
    if eval_results:
        body += ["## Evaluation", ""]
        for task, metrics in eval_results.items():
            body += [f"### {task}", "", "| metric | value |", "|---|---|"]
            body += [f"| {k} | {_fmt(v)} |" for k, v in metrics.items()] + [""]
    body += ["## Library versions", "", "| library | version |", "|---|---|"]
    body += [f"| {k} | {v} |" for k, v in library_versions().items()] + [""]
    return "\n".join(front + body)
