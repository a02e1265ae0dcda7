"""Our unlearning losses side by side with open-unlearning's trainers: the same model, the same forget / retain batch
in open-unlearning's chat tokens, the same hyperparameters; then a short run of full fine-tuning (the same batches
in the same order, the same AdamW) with each side's loss, compared weight by weight.

    PYTHONPATH=. python benchmarks/bench_ou_trainers.py --open-unlearning /path/to/open-unlearning \\
        [--model tiny | smollm2 | DIR] [--steps 3] [--lr 1e-3] [--batch-size 4] [--json FILE]
    PYTHONPATH=. python benchmarks/bench_ou_trainers.py --open-unlearning /path/to/open-unlearning \\
        --smollm2 [npo | graddiff] --steps 2 --batch-size 1 --lr 1e-5
    PYTHONPATH=. python benchmarks/bench_ou_trainers.py --open-unlearning /path/to/open-unlearning \\
        --model smollm2 --steps 2 --step-parts NPO GradDiff [--ou-first]

The second form runs ``unlearn run`` itself (chat format, full fine-tuning, float32) on SmolLM2-135M-Instruct against
OU's trainer class under the Trainer on the same pairs, with OU's attention mask (our default) and without, and
compares the weights after ``--steps`` steps. The third times one step of each side (the second of two, one torch
thread), split into the model's forwards with gradients, its forwards without them (the reference model's),
backward and the AdamW step: which part of a step dominates.

open-unlearning (a checkout of github.com/locuslab/open-unlearning) is imported in this process from its ``src/``:
its trainer package imports ``omegaconf`` (a type annotation) and ``deepspeed`` (RMU's type check of a wrapped
model), which this environment lacks, so both are stubbed with empty stand-ins (no DeepSpeed engine is ever made;
the trainers run on one device). Its ``preprocess_chat_instance`` builds the examples (OU's chat setting:
``apply_chat_template: True``, system prompt "You are a helpful assistant.", the template's ``date_string``) and
its ``DataCollatorForSupervisedDataset`` pads them; transformers 5 returns a dict from ``apply_chat_template
(tokenize=True)``, so OU's function gets the token list it was written for (transformers 4's result).

Per trainer (OU's config defaults; OU's class -> our method):

    GradAscent -> ga, GradDiff -> graddiff, NPO -> npo, SimNPO -> simnpo, DPO with refusals (IdkDPO) -> dpo,
    DPO with alternate answers (community AltPO) -> altpo, RMU -> rmu, UNDIAL -> undial, WGA -> wga,
    SatImp -> satimp, CEU -> ceu, PDU -> pdu; GradDiff / NPO with retain_loss_type: KL -> retain_loss=kl,
    PDU with dual_update_upon: epoch -> dual_update=epoch (each step made an epoch, the dual pass over its examples)

the script prints OU's ``compute_loss``, ours, their difference, and after ``--steps`` optimizer steps the largest
weight difference. Where OU's implementation differs from the paper, ours follows the paper by default and offers
OU's choice as a method parameter; those cases run twice (default and OU's mode) and the default's difference is
expected. ``--model tiny`` (default) is the project's tiny random Llama with a Llama-3-style chat template in plain
text markers; ``smollm2`` the SmolLM2-135M-Instruct fixture (its own template).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import platform
import sys
import tempfile
import types
from datetime import UTC, datetime
from pathlib import Path

import torch

SYSTEM_PROMPT = "You are a helpful assistant."
DATE = "10 Apr 2025"
#: A Llama-3-style chat template in plain-text markers (the tiny tokenizer has no header tokens).
TINY_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}]\n\n"
    "{% if m['role'] == 'system' %}Cutting Knowledge Date: December 2023\nToday Date: {{ date_string }}\n\n{% endif %}"
    "{{ m['content'] }}[eot]{% endfor %}{% if add_generation_prompt %}[assistant]\n\n{% endif %}"
)


def _stub_missing_imports() -> None:
    """Empty stand-ins for the modules OU's trainer package imports but never uses on one device."""
    for name, attrs in (("omegaconf", {"DictConfig": type("DictConfig", (dict,), {})}),
                        ("deepspeed", {"DeepSpeedEngine": type("DeepSpeedEngine", (), {})})):
        if importlib.util.find_spec(name) is None and name not in sys.modules:
            module = types.ModuleType(name)
            module.__spec__ = importlib.machinery.ModuleSpec(name, None)
            module.__dict__.update(attrs)
            sys.modules[name] = module


def load_open_unlearning(checkout: Path) -> types.SimpleNamespace:
    """OU's trainer classes, its chat preprocessing and its collator, imported from ``checkout/src``."""
    src = checkout / "src"
    if not (src / "trainer" / "unlearn" / "grad_ascent.py").is_file():
        sys.exit(f"--open-unlearning {checkout}: no src/trainer/unlearn/ there; pass a checkout of open-unlearning.")
    _stub_missing_imports()
    sys.path.insert(0, str(src))
    import trainer  # noqa: F401  (registers every trainer)
    from trainer.unlearn.ceu import CEU
    from trainer.unlearn.dpo import DPO
    from trainer.unlearn.grad_ascent import GradAscent
    from trainer.unlearn.grad_diff import GradDiff
    from trainer.unlearn.npo import NPO
    from trainer.unlearn.pdu import PDU
    from trainer.unlearn.rmu import RMU
    from trainer.unlearn.satimp import SatImp
    from trainer.unlearn.simnpo import SimNPO
    from trainer.unlearn.undial import UNDIAL
    from trainer.unlearn.wga import WGA

    # data/__init__ imports every dataset class (hydra configs); only utils.py and collators.py are needed
    package = types.ModuleType("data")
    package.__path__ = [str(src / "data")]
    sys.modules.setdefault("data", package)
    utils = _load(src / "data" / "utils.py", "data.utils")
    collators = _load(src / "data" / "collators.py", "data.collators")
    return types.SimpleNamespace(
        trainers={c.__name__: c for c in (GradAscent, GradDiff, NPO, SimNPO, DPO, RMU, UNDIAL, WGA, SatImp, CEU, PDU)},
        preprocess=utils.preprocess_chat_instance, collator=collators.DataCollatorForSupervisedDataset)


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class ListChatTokens:
    """A tokenizer whose ``apply_chat_template(tokenize=True)`` returns the token list, as in transformers 4."""

    def __init__(self, tok) -> None:
        self._tok = tok

    def apply_chat_template(self, *args, **kwargs):
        return self._tok.apply_chat_template(*args, **({"return_dict": False} if kwargs.get("tokenize") else {}),
                                             **kwargs)

    def __getattr__(self, name):
        return getattr(self._tok, name)


#: (label, OU trainer, OU method_args (its configs/trainer/*.yaml), our method, our params, OU's forget input).
#: The "OU mode" rows set our parameter that selects open-unlearning's choice.
def cases(rmu_layer: int) -> list[tuple[str, str, dict, str, dict, str]]:
    rmu_ou = {"gamma": 1.0, "alpha": 1.0, "steering_coeff": 2.0, "retain_loss_type": "EMBED_DIFF",
              "module_regex": rf"model\.layers\.{rmu_layer}", "trainable_params_regex": [".*"]}
    rmu = {"layer": rmu_layer, "steering_coeff": 2.0, "alpha": 1.0, "seed": 0}
    undial_ou = {"gamma": 1.0, "alpha": 0.0, "beta": 10.0, "retain_loss_type": "NLL"}
    pdu_ou = {"retain_loss_eps": 0.3, "primal_dual": True, "dual_step_size": 1.0, "dual_update_upon": "step",
              "dual_warmup_epochs": 0, "gamma": 1.0, "alpha": 1.0}
    pdu = {"gamma": 1.0, "alpha": 1.0, "retain_eps": 0.3, "dual_step_size": 1.0, "dual_warmup_epochs": 0.0}
    return [
        ("GradAscent", "GradAscent", {}, "ga", {}, "forget"),
        ("GradDiff", "GradDiff", {"gamma": 1.0, "alpha": 1.0, "retain_loss_type": "NLL"}, "graddiff",
         {"gamma": 1.0, "alpha": 1.0}, "forget"),
        ("GradDiff (KL)", "GradDiff", {"gamma": 1.0, "alpha": 1.0, "retain_loss_type": "KL"}, "graddiff",
         {"gamma": 1.0, "alpha": 1.0, "retain_loss": "kl"}, "forget"),
        ("NPO", "NPO", {"beta": 0.1, "alpha": 1.0, "gamma": 1.0, "retain_loss_type": "NLL"}, "npo",
         {"beta": 0.1, "alpha": 1.0, "gamma": 1.0}, "forget"),
        ("NPO (KL)", "NPO", {"beta": 0.1, "alpha": 1.0, "gamma": 1.0, "retain_loss_type": "KL"}, "npo",
         {"beta": 0.1, "alpha": 1.0, "gamma": 1.0, "retain_loss": "kl"}, "forget"),
        ("SimNPO", "SimNPO", {"delta": 0.0, "beta": 4.5, "alpha": 1.0, "gamma": 0.125, "retain_loss_type": "NLL"},
         "simnpo", {"delta": 0.0, "beta": 4.5, "alpha": 1.0, "gamma": 0.125}, "forget"),
        ("IdkDPO", "DPO", {"beta": 0.1, "alpha": 1.0, "gamma": 1.0, "retain_loss_type": "NLL"}, "dpo",
         {"beta": 0.1, "alpha": 1.0, "gamma": 1.0}, "idk"),
        ("AltPO", "DPO", {"beta": 0.1, "alpha": 1.0, "gamma": 1.0, "retain_loss_type": "NLL"}, "altpo",
         {"beta": 0.1, "alpha": 1.0, "gamma": 1.0}, "alternate"),
        ("RMU", "RMU", rmu_ou, "rmu", rmu, "forget"),
        ("RMU (OU mode)", "RMU", rmu_ou, "rmu", {**rmu, "positions": "open_unlearning"}, "forget"),
        ("UNDIAL", "UNDIAL", undial_ou, "undial", {"gamma": 1.0, "alpha": 0.0, "beta": 10.0}, "forget"),
        ("UNDIAL (OU mode)", "UNDIAL", undial_ou, "undial", {"gamma": 1.0, "alpha": 0.0, "beta": 10.0,
                                                            "all_positions": True}, "forget"),
        ("WGA", "WGA", {"beta": 1.0, "alpha": 1.0, "gamma": 1.0, "retain_loss_type": "NLL"}, "wga",
         {"beta": 1.0, "alpha": 1.0, "gamma": 1.0}, "forget"),
        ("SatImp", "SatImp", {"beta1": 5.0, "beta2": 1.0, "alpha": 1.0, "gamma": 0.1, "retain_loss_type": "NLL"},
         "satimp", {"beta1": 5.0, "beta2": 1.0, "alpha": 1.0, "gamma": 0.1}, "forget"),
        ("CE-U", "CEU", {"ignore_first_n_answer_tokens": 1}, "ceu", {"ignore_first_n": 1}, "forget"),
        ("PDU", "PDU", pdu_ou, "pdu", pdu, "forget"),
        ("PDU (OU mode)", "PDU", pdu_ou, "pdu", {**pdu, "ou_positions": True}, "forget"),
        ("PDU (epoch)", "PDU", {**pdu_ou, "dual_update_upon": "epoch"}, "pdu",
         {**pdu, "ou_positions": True, "dual_update": "epoch"}, "forget"),
    ]


def build_model(which: str, work: Path):
    """(model folder, tokenizer with a chat template)."""
    from transformers import AutoTokenizer

    if which == "tiny":
        from unlearn_methods.scaffolding.tiny_model import build_tiny_model
        from unlearn_methods.scaffolding.tofu_corpus import tokenizer_texts

        folder = work / "tiny"
        _, tok = build_tiny_model(tokenizer_texts(0), folder, seed=0)
        tok.chat_template = TINY_TEMPLATE
        tok.save_pretrained(folder)
    elif which == "smollm2":
        from unlearn_methods.pretrained import build_smollm2

        folder = build_smollm2()
    else:
        folder = Path(which)
    tok = AutoTokenizer.from_pretrained(folder)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return folder, tok


def training_data(tok, template_args: dict, data_dir: Path):
    """(forget records, our dataset of the demo corpus's forget10 with retain90 items, refusals and alternate
    answers, in the chat format)."""
    from unlearn_methods.forget_retain import ForgetRetainDataset, load_qa
    from unlearn_methods.prompt_format import PromptFormat

    forget, retain = load_qa("forget10", data_dir=str(data_dir)), load_qa("retain90", data_dir=str(data_dir))
    alternates = [[f"{r['answer'].split(' ')[0]} is not the one; it was someone else entirely."] for r in forget]
    dataset = ForgetRetainDataset(forget, retain, tok, ["I have no idea.", "That I cannot say."], seed=0,
                                  max_length=512, alternates=alternates,
                                  prompt=PromptFormat(True, SYSTEM_PROMPT, template_args, ou_chat_mask=True))
    return forget, alternates, dataset


def batch_indices(b: int, batch_size: int, n_items: int) -> list[int]:
    """The items of batch ``b`` (in order, wrapping around)."""
    return [(b * batch_size + i) % n_items for i in range(batch_size)]


def our_batches(tok, template_args: dict, batch_size: int, n: int, data_dir: Path) -> list[dict]:
    """``n`` of our batches, in order."""
    return our_data(tok, template_args, batch_size, n, data_dir)[0]


def our_data(tok, template_args: dict, batch_size: int, n: int, data_dir: Path) -> tuple[list[dict], list[dict]]:
    """(``n`` of our batches in order, the examples they hold in order)."""
    from unlearn_methods.forget_retain import PairCollator

    _, _, dataset = training_data(tok, template_args, data_dir)
    collate = PairCollator(tok.pad_token_id, hide_pad_token=True)  # unlearn run's default in the chat format
    items = [[dataset[i] for i in batch_indices(b, batch_size, len(dataset))] for b in range(n)]
    return [collate(x) for x in items], [x for batch in items for x in batch]


def batches(ou, tok, template_args: dict, batch_size: int, n: int, data_dir: Path):
    """(``n`` batches: (OU's batch from its preprocessing and collator, ours), the tokens and attention masks checked
    equal; (OU's items, ours) of those batches in order)."""
    forget, alternates, ours = training_data(tok, template_args, data_dir)
    listed = ListChatTokens(tok)
    template = {"apply_chat_template": True, "system_prompt": SYSTEM_PROMPT, **template_args}
    collate_ou = ou.collator(tok)
    out, items = [], ([], [])
    for b, our_batch in enumerate(our_batches(tok, template_args, batch_size, n, data_dir)):
        items[1].extend(ours[i] for i in batch_indices(b, batch_size, len(ours)))
        ou_items = []
        for i in batch_indices(b, batch_size, len(ours)):
            f, _ = ours.examples[i]
            q, r = forget[f], ours.retain[ours.retain_order[i % len(ours.retain)]]

            def pre(question, answer):
                return ou.preprocess(listed, template, [question], [answer], max_length=512)

            ou_items.append({"forget": pre(q["question"], q["answer"]), "retain": pre(r["question"], r["answer"]),
                             "idk": pre(q["question"], ours.idk[f]), "alternate": pre(q["question"], alternates[f][0])})
        items[0].extend(ou_items)
        ou_batch = collate_ou(ou_items)
        for part, key in (("forget", "forget"), ("retain", "retain"), ("forget_idk", "idk"),
                          ("forget_alternate", "alternate")):
            for name in ("input_ids", "labels", "attention_mask"):
                assert torch.equal(our_batch[part][name].long(), ou_batch[key][name].long()), (part, name)
        out.append((ou_batch, our_batch))
    return out, items


def hidden_turn_ends(batch: dict) -> int:
    """Positions inside the sequences (before each row's last attended one) that the attention mask hides: with OU's
    mask, the pad token where it ends a turn."""
    hidden = 0
    for row in batch["attention_mask"].bool():
        kept = row.nonzero()
        if len(kept):
            hidden += int((~row[: int(kept.max())]).sum())
    return hidden


def ou_inputs(batch: dict, forget: str) -> dict:
    if forget == "forget":
        return {"forget": batch["forget"], "retain": batch["retain"]}
    return {"forget": {"original": batch["forget"], "alternate": batch[forget]}, "retain": batch["retain"]}


def make_trainers(ou, case, model_dir: Path, work: Path, items=None, tok=None, batch_size: int = 1):
    """(OU's trainer, our trainer), each on its own copy of the model; with ``items`` ((OU's, ours)), each with its
    training set and collator (PDU's dual pass over the epoch reads them)."""
    from transformers import AutoModelForCausalLM, TrainingArguments

    from unlearn_methods import get_method
    from unlearn_methods.base import UnlearnTrainer
    from unlearn_methods.forget_retain import PairCollator

    label, ou_name, ou_args, ours_name, ours_params, _ = case
    args = TrainingArguments(output_dir=str(work / "trainer"), report_to=[], use_cpu=True,
                             per_device_train_batch_size=batch_size, remove_unused_columns=False)
    data = {}
    if items is not None:
        data = ({"train_dataset": items[0], "data_collator": ou.collator(tok)},
                {"train_dataset": items[1], "data_collator": PairCollator(tok.pad_token_id, hide_pad_token=True)})
    ou_model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    our_model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    ou_trainer = ou.trainers[ou_name](model=ou_model, args=args, **(data[0] if data else {}), **ou_args)
    ou_trainer.state.epoch = 0.0
    our_trainer = UnlearnTrainer(model=our_model, args=args, method=get_method(ours_name, ours_params),
                                 **(data[1] if data else {}))
    our_trainer.state.epoch = 0.0
    return ou_trainer, our_trainer


def run_case(ou, case, model_dir: Path, data, steps: int, lr: float, work: Path, items=None, tok=None,
             batch_size: int = 1) -> dict:
    """OU's and our losses at each of ``steps`` AdamW steps on ``data``, and the weights after them. PDU with the
    dual variable moved per epoch: each step is an epoch (the training set is ``items``, one pass per epoch)."""
    epochs = case[1] == "PDU" and case[2].get("dual_update_upon") == "epoch"
    ou_trainer, our_trainer = make_trainers(ou, case, model_dir, work, items if epochs else None, tok, batch_size)
    forget = case[5]
    result: dict = {"case": case[0], "ou_losses": [], "our_losses": []}
    ou_opt = torch.optim.AdamW(ou_trainer.model.parameters(), lr=lr, weight_decay=0.0)
    our_opt = torch.optim.AdamW(our_trainer.model.parameters(), lr=lr, weight_decay=0.0)
    from unlearn_methods import reference

    # our batches carry the reference values the run's data loader would give them, computed before any step
    data = [(ou_batch, reference.scored(our_trainer.model, our_batch, our_trainer.method.reference_nll))
            for ou_batch, our_batch in data]
    for step in range(steps):
        ou_batch, our_batch = data[step % len(data)]
        torch.manual_seed(0)  # RMU's random direction: OU draws torch.rand from the global generator
        ou_loss = ou_trainer.compute_loss(ou_trainer.model, ou_inputs(ou_batch, forget))
        our_loss = our_trainer.compute_loss(our_trainer.model, our_batch)
        result["ou_losses"].append(float(ou_loss.detach()))
        result["our_losses"].append(float(our_loss.detach()))
        for loss, opt in ((ou_loss, ou_opt), (our_loss, our_opt)):
            opt.zero_grad()
            loss.backward()
            opt.step()
        our_trainer.state.global_step = ou_trainer.state.global_step = step + 1
        if epochs:  # the end of an epoch: each side's dual pass over the training set, in the same sampled order
            our_trainer.state.epoch = ou_trainer.state.epoch = float(step + 1)
            torch.manual_seed(step)
            ou_trainer.post_epoch_dual_param_update()
            torch.manual_seed(step)
            our_trainer.method.on_epoch_end(our_trainer.ctx)
            result.setdefault("ou_dual", []).append(float(ou_trainer.preferences[1]))
            result.setdefault("our_dual", []).append(float(our_trainer.method.dual))
    ou_weights = dict(ou_trainer.model.named_parameters())
    result["max_weight_diff"] = max(float((p.detach() - ou_weights[n].detach()).abs().max())
                                    for n, p in our_trainer.model.named_parameters())
    from transformers import AutoModelForCausalLM

    start = dict(AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).named_parameters())
    result["max_weight_change"] = max(float((p.detach() - start[n].detach()).abs().max())
                                      for n, p in ou_trainer.model.named_parameters())
    return result


def step_parts(ou, case, model_dir: Path, data, work: Path, ou_first: bool = False) -> dict[str, dict[str, float]]:
    """Seconds of the second of two AdamW steps on each side, split into the model's forwards with gradients, its
    forwards without (the reference model's), backward and the optimiser step: which part of a step dominates."""
    import time
    from collections import defaultdict

    from transformers import AutoModelForCausalLM

    parts: dict[str, float] = defaultdict(float)
    cls = type(AutoModelForCausalLM.from_pretrained(model_dir))
    original = cls.forward

    def timed_forward(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            parts["forward" if torch.is_grad_enabled() else "reference forward"] += time.perf_counter() - start

    cls.forward = timed_forward
    try:
        ou_trainer, our_trainer = make_trainers(ou, case, model_dir, work)
        sides = [("OU", ou_trainer), ("ours", our_trainer)]
        out = {}
        for side, trainer in sides if ou_first else sides[::-1]:
            opt = torch.optim.AdamW(trainer.model.parameters(), lr=1e-5)
            for step in range(2):
                parts.clear()
                ou_batch, our_batch = data[step % len(data)]
                torch.manual_seed(0)
                start = time.perf_counter()
                loss = trainer.compute_loss(trainer.model, ou_inputs(ou_batch, case[5]) if side == "OU" else our_batch)
                opt.zero_grad()
                backward = time.perf_counter()
                loss.backward()
                stepped = time.perf_counter()
                opt.step()
                end = time.perf_counter()
            out[side] = {**parts, "backward": stepped - backward, "optimiser step": end - stepped,
                         "total": end - start}
        return out
    finally:
        cls.forward = original


def _ou_handling_hf5(cls):
    """OU's trainer class, its ``compute_loss`` taking the ``num_items_in_batch`` that transformers 5's training step
    passes (OU's signature predates it; the loss is OU's)."""

    class Compat(cls):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            return super().compute_loss(model, inputs, return_outputs=return_outputs)

    return Compat


def relative_update_diff(a, b, start) -> tuple[float, float]:
    """(||(a - start) - (b - start)|| / ||b - start|| over every parameter, the fraction of weights whose updates
    differ by more than 1% of b's largest update): the size of the difference of two runs' weight updates."""
    other, first = dict(b.named_parameters()), dict(start.named_parameters())
    diff = change = 0.0
    largest = max(float((p.detach() - first[n].detach()).abs().max()) for n, p in other.items())
    differing = total = 0
    for n, p in a.named_parameters():
        d = p.detach() - other[n].detach()
        diff += float((d.double() ** 2).sum())
        change += float(((other[n].detach() - first[n].detach()).double() ** 2).sum())
        differing += int((d.abs() > 0.01 * largest).sum())
        total += d.numel()
    return (diff / max(change, 1e-300)) ** 0.5, differing / total


def max_param_diff(a, b) -> float:
    """The largest absolute difference between two models' parameters of the same names."""
    other = dict(b.named_parameters())
    return max(float((p.detach() - other[n].detach()).abs().max()) for n, p in a.named_parameters())


def unlearn_run_side_by_side(ou, method: str, epochs: float, batch_size: int, lr: float, forget: str,
                             work: Path) -> list[dict]:
    """``unlearn run`` (chat format, OU's system prompt, full fine-tuning, float32) on SmolLM2-135M-Instruct and the
    demo corpus, with OU's attention mask (our default) and without it, against OU's trainer class run by the
    Trainer with OU's preprocessing and collator on the same forget / retain pairs, the same Trainer arguments (so
    the same sampled order) and seed; the weights compared."""
    import subprocess

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers import set_seed as hf_set_seed

    from unlearn_methods.config import load_run_config
    from unlearn_methods.forget_retain import ForgetRetainDataset, load_qa
    from unlearn_methods.idk import load_idk_answers
    from unlearn_methods.pretrained import build_smollm2
    from unlearn_methods.prompt_format import PromptFormat
    from unlearn_methods.scaffolding.tofu_corpus import write_corpus
    from unlearn_methods.training import _training_args

    model_dir, data_dir = build_smollm2(), write_corpus(work / "data")
    outs = {}
    for mask in (True, False):
        outs[mask] = work / f"ours-{method}-{mask}"
        command = [sys.executable, "-m", "unlearn_app", "run", "--method", method, "--model", str(model_dir), "--data",
                   "demo", "--data-dir", str(data_dir), "--forget", forget, "--full", "--prompt-format", "chat",
                   "--system-prompt", SYSTEM_PROMPT, "--dtype", "float32", "--batch-size", str(batch_size),
                   "--epochs", str(epochs), "--lr", str(lr), "--out", str(outs[mask]), "--quiet"]
        subprocess.run(command + ([] if mask else ["--no-ou-chat-mask"]), check=True)
    cfg = load_run_config(str(outs[True] / "unlearn_config.yaml"), out=str(work / "ou-run"), model=str(model_dir),
                          data_dir=str(data_dir))

    tok = AutoTokenizer.from_pretrained(model_dir)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    forget_rows, retain_rows = load_qa(cfg.forget, data_dir=str(data_dir)), load_qa(cfg.retain, data_dir=str(data_dir))
    ours = ForgetRetainDataset(forget_rows, retain_rows, tok, load_idk_answers(None), seed=cfg.seed,
                               max_length=cfg.max_length, prompt=PromptFormat(True, SYSTEM_PROMPT))
    template = {"apply_chat_template": True, "system_prompt": SYSTEM_PROMPT}
    listed, items = ListChatTokens(tok), []
    for k in range(len(ours)):  # our pairing (OU draws a retain item at random at each access)
        f, r = forget_rows[ours.examples[k][0]], retain_rows[ours.retain_order[k % len(retain_rows)]]
        item = {"forget": ou.preprocess(listed, template, [f["question"]], [f["answer"]], max_length=cfg.max_length),
                "retain": ou.preprocess(listed, template, [r["question"]], [r["answer"]], max_length=cfg.max_length)}
        for part in ("forget", "retain"):
            assert item[part]["input_ids"].tolist() == ours[k][part]["input_ids"], (k, part)
            assert item[part]["labels"].tolist() == ours[k][part]["labels"], (k, part)
        items.append(item)
    name, ou_args = {"graddiff": ("GradDiff", {"gamma": 1.0, "alpha": 1.0, "retain_loss_type": "NLL"}),
                     "npo": ("NPO", {"beta": 0.1, "alpha": 1.0, "gamma": 1.0, "retain_loss_type": "NLL"})}[method]
    hf_set_seed(cfg.seed)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    args = _training_args(cfg, work / "ou", len(items))
    args.save_strategy, args.disable_tqdm = "no", True
    trainer = _ou_handling_hf5(ou.trainers[name])(model=model, args=args, train_dataset=items,
                                                  data_collator=ou.collator(tok), **ou_args)
    trainer.train()
    start = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    hidden = sum(int((torch.tensor(x[p]["input_ids"][:-1]) == tok.pad_token_id).sum()) for x in ours
                 for p in ("forget", "retain"))
    rows = []
    for mask, out in outs.items():
        trained = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
        rows.append({"method": method, "ou_chat_mask": mask, "steps": trainer.state.global_step, "lr": lr,
                     "batch_size": batch_size, "forget": forget, "examples": len(items), "hidden_turn_ends": hidden,
                     "max_weight_change": max_param_diff(trained, start),
                     "max_weight_change_ou": max_param_diff(model, start),
                     "max_weight_diff": max_param_diff(trained, model),
                     **dict(zip(("relative_update_diff", "fraction_differing"),
                                relative_update_diff(trained, model, start)))})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--open-unlearning", required=True, metavar="DIR", help="A checkout of open-unlearning.")
    parser.add_argument("--model", default="tiny", help="tiny (default), smollm2 or a model folder with a chat "
                        "template.")
    parser.add_argument("--steps", type=int, default=3, help="Optimizer steps of the short run (default 3).")
    parser.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate of the short run (default 1e-3).")
    parser.add_argument("--batch-size", type=int, default=4, help="Forget items per batch (default 4).")
    parser.add_argument("--only", nargs="*", help="Run only these cases (labels as printed).")
    parser.add_argument("--json", metavar="FILE", help="Also write the results as JSON.")
    parser.add_argument("--smollm2", nargs="*", metavar="METHOD", choices=("npo", "graddiff"),
                        help="Instead: `unlearn run` METHOD (npo, graddiff; default npo) in the chat format on "
                        "SmolLM2-135M-Instruct against OU's trainer run by the Trainer on the same pairs; the weights "
                        "after --steps steps (--batch-size, --lr) on the demo corpus's forget01 compared, with OU's "
                        "attention mask (our default) and without it.")
    parser.add_argument("--step-parts", nargs="+", metavar="CASE", help="Instead: time one step of these cases (labels "
                        "as printed) on each side, split into forwards, reference forwards, backward and AdamW.")
    parser.add_argument("--ou-first", action="store_true", help="With --step-parts: open-unlearning's side first.")
    args = parser.parse_args(argv)

    from transformers.utils import logging as hf_logging

    from unlearn_methods.scaffolding.tofu_corpus import write_corpus

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch.use_deterministic_algorithms(True)
    ou = load_open_unlearning(Path(args.open_unlearning).resolve())
    rows = []
    if args.smollm2 is not None:
        print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()} ({os.cpu_count()} CPUs, load "
              f"{os.getloadavg()[0]:.2f}); unlearn run vs OU's trainer, SmolLM2-135M-Instruct, float32, full "
              f"fine-tuning, batch {args.batch_size}, lr {args.lr:g}")
        with tempfile.TemporaryDirectory() as tmp:
            for method in args.smollm2 or ["npo"]:
                # forget01 holds 6 examples: --steps of them
                for r in unlearn_run_side_by_side(ou, method, args.steps * args.batch_size / 6 - 1e-3,
                                                  args.batch_size, args.lr, "forget01", Path(tmp) / method):
                    rows.append(r)
                    print(f"{method:<9} ou_chat_mask={str(r['ou_chat_mask']).lower():<5} {r['steps']} steps on {r['examples']} "
                          f"examples ({r['hidden_turn_ends']} end-of-turn tokens inside them): largest weight change "
                          f"{r['max_weight_change']:.2e} (OU {r['max_weight_change_ou']:.2e}), largest weight "
                          f"difference to OU {r['max_weight_diff']:.2e}; updates' difference / OU's update "
                          f"{r['relative_update_diff']:.2e} (L2), weights whose updates differ by more than 1% of the "
                          f"largest: {r['fraction_differing']:.2e}", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model_dir, tok = build_model(args.model, work)
        template_args = {"date_string": DATE} if "date_string" in (tok.chat_template or "") else {}
        data, items = batches(ou, tok, template_args, args.batch_size, max(1, args.steps), write_corpus(work / "data"))
        from transformers import AutoConfig

        if args.step_parts:
            torch.set_num_threads(1)
            layer = max(0, AutoConfig.from_pretrained(model_dir).num_hidden_layers // 2 - 1)
            for case in [c for c in cases(layer) if c[0] in args.step_parts]:
                for side, t in step_parts(ou, case, model_dir, data, work, args.ou_first).items():
                    print(f"{case[0]} {side}: " + ", ".join(f"{k} {v:.2f} s" for k, v in t.items()), flush=True)
            return 0
        rmu_layer = max(0, AutoConfig.from_pretrained(model_dir).num_hidden_layers // 2 - 1)
        print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()} ({os.cpu_count()} CPUs, load "
              f"{os.getloadavg()[0]:.2f}), model {args.model}, batch {args.batch_size}, {args.steps} steps, lr {args.lr:g}; "
              f"examples in OU's chat tokens (system prompt, {template_args or 'no template arguments'}) and its "
              f"attention mask ({sum(hidden_turn_ends(b[1][p]) for b in data for p in ('forget', 'retain'))} "
              f"end-of-turn positions hidden in the forget / retain batches): identical")
        print(f"{'case':<18} {'OU loss (step 1)':>17} {'ours':>17} {'|diff|':>9} {'max |dW|':>9} {'max dW vs OU':>13}")
        for case in cases(rmu_layer):
            if args.only and case[0] not in args.only:
                continue
            r = run_case(ou, case, model_dir, data, args.steps, args.lr, work, items, tok, args.batch_size)
            diff = max(abs(a - b) for a, b in zip(r["ou_losses"], r["our_losses"]))
            r["max_loss_diff"] = diff
            rows.append(r)
            print(f"{r['case']:<18} {r['ou_losses'][0]:>17.9g} {r['our_losses'][0]:>17.9g} {diff:>9.2e} "
                  f"{r['max_weight_change']:>9.2e} {r['max_weight_diff']:>13.2e}")
            if "ou_dual" in r:
                print(f"{'':<18} dual variable after each epoch: OU {r['ou_dual']}, ours {r['our_dual']}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
