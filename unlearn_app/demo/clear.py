"""``unlearn demo --benchmark clear``: CLEAR's story offline on synthetic people and a tiny LLaVA.

1. write a CLEAR-layout dataset (20 fictitious people with PIL-drawn faces, captions, text facts; real-faces and
   real-world stand-ins) to ``WORKDIR/clear_data``;
2. build a tiny LLaVA (CLIP-style vision tower + tiny Llama) and its processor;
3. fine-tune a *target* on every person (captions with images + text facts) and a *gold* model on retain90 only
   (both also on the real-faces / real-world stand-ins, the knowledge a pretrained VLM brings);
4. evaluate the gold model with ``clear_forget10_image`` (it becomes the Forget Quality reference);
5. unlearn forget10 from the target with Gradient Difference by text, by image and by both;
6. evaluate every model with ``clear_forget10_image`` on lm-eval's ``hf-multimodal`` backend, add the text facts'
   forget/retain probability, and print / write the table (``WORKDIR/clear_results.json``, ``clear_report.md``).
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path

from harness_ext.results import json_safe, task_metrics
from unlearn_app.reports.tables import markdown_table

TASK = "clear_forget10_image"
ROWS = [
    ("forget_quality", "Forget Quality (KS p-value vs gold)"),
    ("model_utility", "Model Utility"),
    ("forget_caption_prob", "Forget caption probability"),
    ("retain_caption_prob", "Retain caption probability"),
    ("forget_caption_rougeL_recall", "Forget caption ROUGE-L recall"),
    ("retain_caption_rougeL_recall", "Retain caption ROUGE-L recall"),
    ("forget_facerec_prob", "Forget face recognition (normalised prob.)"),
    ("retain_facerec_prob", "Retain face recognition (normalised prob.)"),
    ("forget_caption_truth_ratio", "Forget caption truth ratio"),
    ("text_forget_prob", "Forget text facts probability"),
    ("text_retain_prob", "Retain text facts probability"),
]


def run_clear_demo(workdir: Path, seed: int = 0, epochs: int = 30, quiet: bool = False,
                   unlearn: tuple[str, float, float] = ("graddiff", 3, 5e-4), items_per_set: int = 6) -> dict:
    """Run the CLEAR demo; returns ``{model: {metric: value}}``."""
    import datasets
    import torch
    from transformers.utils import logging as hf_logging

    from harness_ext.evaluate import run_lm_eval
    from unlearn_methods import checkpoint_folder
    from unlearn_methods.config import RunConfig
    from unlearn_methods.scaffolding.clear_corpus import corpus_texts, write_clear_layout
    from unlearn_methods.scaffolding.tiny_vlm import build_tiny_llava
    from unlearn_methods.training import train
    from unlearn_methods.vlm import answer_probability, clear_records, finetune_vlm

    hf_logging.set_verbosity_error()
    datasets.disable_progress_bars()
    wd = Path(workdir).resolve()
    start, total = time.perf_counter(), 6

    def stage(n: int, text: str) -> None:
        print(f"[{n}/{total}] {text}", flush=True)

    stage(1, f"Writing a CLEAR-layout dataset (20 synthetic people, PIL faces) to {wd / 'clear_data'}")
    data_dir = write_clear_layout(wd / "clear_data", n_people=20, poses=2)
    stage(2, "Building a tiny LLaVA (CLIP-style vision tower + tiny Llama) and its processor")
    model, processor = build_tiny_llava(corpus_texts(), seed=seed)
    init = copy.deepcopy(model.state_dict())
    models: dict[str, Path] = {}
    stage(3, f"Fine-tuning the target (all people) and the gold model (retain90), {epochs} epochs each")
    for name, config in (("target", "full"), ("gold", "retain90")):
        model.load_state_dict(init)
        records = clear_records(config, "both", str(data_dir), seed=seed) + _world_knowledge(data_dir)
        losses = finetune_vlm(model, processor, records, epochs=epochs, seed=seed, progress=not quiet)
        print(f"      {name}: final training loss {losses[-1]:.4f}")
        models[name] = wd / "models" / name
        with checkpoint_folder.writing(models[name]) as folder:
            model.save_pretrained(folder)
            processor.save_pretrained(folder)
    method, n_epochs, lr = unlearn
    for modality in ("text", "image", "both"):
        stage(4, f"Unlearning forget10 from the target with {method} by {modality}")
        out = wd / "models" / f"{method}_{modality}"
        train(RunConfig(method=method, model=str(models["target"]), out=str(out), data="clear",
                        data_dir=str(data_dir), forget="forget10", modality=modality, lora=False, epochs=n_epochs,
                        lr=lr, batch_size=4, seed=seed, progress=not quiet))
        models[f"{method} ({modality})"] = out
    stage(5, f"Evaluating with lm-eval (hf-multimodal): {TASK} on gold (the reference), then the others")
    meta = {"data_dir": str(data_dir), "max_items_per_split": items_per_set}
    table: dict[str, dict[str, float]] = {}
    order = ["gold"] + [n for n in models if n != "gold"]
    for name in order:
        run_meta = meta if name == "gold" else {**meta, "reference": str(wd / "eval" / "gold")}
        res = run_lm_eval(models[name], [TASK], wd / "eval" / name.replace(" ", "_").strip("()"), run_meta,
                          backend="hf-multimodal", batch_size=8, gen_kwargs="max_gen_toks=24",
                          log_samples=True)
        table[name] = task_metrics(res)[TASK]
        from unlearn_methods.vlm import load_vision_model

        proc, vlm = load_vision_model(str(models[name]), torch.float32)
        for split, key in (("forget10", "text_forget_prob"), ("retain90", "text_retain_prob")):
            table[name][key] = answer_probability(vlm, proc, clear_records(split, "text", str(data_dir)))
    table["gold"]["forget_quality"] = 1.0  # against itself, by construction
    stage(6, f"Writing {wd / 'clear_results.json'} and {wd / 'clear_report.md'}")
    ordered = {n: table[n] for n in [n for n in order if n != "gold"] + ["gold"]}
    report = (f"# CLEAR demo ({TASK}, tiny LLaVA, {time.perf_counter() - start:.0f} s)\n\n"
              f"{markdown_table(ordered, ROWS)}\n\nColumns: the target (trained on every person), {method} run on "
              f"the forget people's text facts, image captions, or both, and the gold model (never saw the forget "
              f"people). Probabilities are length-normalised; face recognition is normalised over the name options; "
              f"the text rows are scored directly on the people's text facts.\n")
    (wd / "clear_results.json").write_text(json.dumps(json_safe({"task": TASK, "models": ordered}), indent=2))
    (wd / "clear_report.md").write_text(report)
    print()
    print(report)
    return ordered


def _world_knowledge(data_dir: Path) -> list[dict]:
    """The real_faces / real_world stand-ins as training rows: what a pretrained VLM would already know."""
    from unlearn_tasks.clear.data import load_clear
    from unlearn_tasks.clear.documents import FACE_QUESTION

    rows = [{"question": FACE_QUESTION, "answer": r["answer"], "image": r["image"]} for r in load_clear("real_faces", data_dir)]
    rows += [{"question": r["question"], "answer": r["answer"], "image": r["image"]} for r in load_clear("real_world", data_dir)]
    return rows
