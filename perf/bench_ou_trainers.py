"""Our unlearning losses side by side with open-unlearning's trainers: the same model, the same forget / retain batch
in open-unlearning's chat tokens, the same hyperparameters; then a short run of full fine-tuning (the same batches
in the same order, the same AdamW) with each side's loss, compared weight by weight.

    PYTHONPATH=. python perf/bench_ou_trainers.py --open-unlearning /path/to/open-unlearning \\
        [--model tiny | smollm2 | DIR] [--steps 3] [--lr 1e-3] [--batch-size 4] [--json FILE]

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
    SatImp -> satimp, CEU -> ceu, PDU -> pdu

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
        ("NPO", "NPO", {"beta": 0.1, "alpha": 1.0, "gamma": 1.0, "retain_loss_type": "NLL"}, "npo",
         {"beta": 0.1, "alpha": 1.0, "gamma": 1.0}, "forget"),
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
                                  prompt=PromptFormat(True, SYSTEM_PROMPT, template_args))
    return forget, alternates, dataset


def batch_indices(b: int, batch_size: int, n_items: int) -> list[int]:
    """The items of batch ``b`` (in order, wrapping around)."""
    return [(b * batch_size + i) % n_items for i in range(batch_size)]


def our_batches(tok, template_args: dict, batch_size: int, n: int, data_dir: Path) -> list[dict]:
    """``n`` of our batches, in order."""
    from unlearn_methods.forget_retain import PairCollator

    _, _, dataset = training_data(tok, template_args, data_dir)
    collate = PairCollator(tok.pad_token_id)
    return [collate([dataset[i] for i in batch_indices(b, batch_size, len(dataset))]) for b in range(n)]


def batches(ou, tok, template_args: dict, batch_size: int, n: int, data_dir: Path):
    """``n`` batches: (OU's batch from its preprocessing and collator, ours), the tokens checked equal."""
    forget, alternates, ours = training_data(tok, template_args, data_dir)
    listed = ListChatTokens(tok)
    template = {"apply_chat_template": True, "system_prompt": SYSTEM_PROMPT, **template_args}
    collate_ou = ou.collator(tok)
    out = []
    for b, our_batch in enumerate(our_batches(tok, template_args, batch_size, n, data_dir)):
        ou_items = []
        for i in batch_indices(b, batch_size, len(ours)):
            f, _ = ours.examples[i]
            q, r = forget[f], ours.retain[ours.retain_order[i % len(ours.retain)]]

            def pre(question, answer):
                return ou.preprocess(listed, template, [question], [answer], max_length=512)

            ou_items.append({"forget": pre(q["question"], q["answer"]), "retain": pre(r["question"], r["answer"]),
                             "idk": pre(q["question"], ours.idk[f]), "alternate": pre(q["question"], alternates[f][0])})
        ou_batch = collate_ou(ou_items)
        for part, key in (("forget", "forget"), ("retain", "retain"), ("forget_idk", "idk"),
                          ("forget_alternate", "alternate")):
            for name in ("input_ids", "labels"):
                assert torch.equal(our_batch[part][name], ou_batch[key][name]), (part, name)
        out.append((ou_batch, our_batch))
    return out


def ou_inputs(batch: dict, forget: str) -> dict:
    if forget == "forget":
        return {"forget": batch["forget"], "retain": batch["retain"]}
    return {"forget": {"original": batch["forget"], "alternate": batch[forget]}, "retain": batch["retain"]}


def make_trainers(ou, case, model_dir: Path, work: Path):
    """(OU's trainer, our trainer), each on its own copy of the model."""
    from transformers import AutoModelForCausalLM, TrainingArguments

    from unlearn_methods import get_method
    from unlearn_methods.base import UnlearnTrainer

    label, ou_name, ou_args, ours_name, ours_params, _ = case
    args = TrainingArguments(output_dir=str(work / "trainer"), report_to=[], use_cpu=True, per_device_train_batch_size=1)
    ou_model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    our_model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    ou_trainer = ou.trainers[ou_name](model=ou_model, args=args, **ou_args)
    ou_trainer.state.epoch = 0.0
    our_trainer = UnlearnTrainer(model=our_model, args=args, method=get_method(ours_name, ours_params))
    our_trainer.state.epoch = 0.0
    return ou_trainer, our_trainer


def run_case(ou, case, model_dir: Path, data, steps: int, lr: float, work: Path) -> dict:
    ou_trainer, our_trainer = make_trainers(ou, case, model_dir, work)
    forget = case[5]
    result: dict = {"case": case[0], "ou_losses": [], "our_losses": []}
    ou_opt = torch.optim.AdamW(ou_trainer.model.parameters(), lr=lr, weight_decay=0.0)
    our_opt = torch.optim.AdamW(our_trainer.model.parameters(), lr=lr, weight_decay=0.0)
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
    ou_weights = dict(ou_trainer.model.named_parameters())
    result["max_weight_diff"] = max(float((p.detach() - ou_weights[n].detach()).abs().max())
                                    for n, p in our_trainer.model.named_parameters())
    from transformers import AutoModelForCausalLM

    start = dict(AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).named_parameters())
    result["max_weight_change"] = max(float((p.detach() - start[n].detach()).abs().max())
                                      for n, p in ou_trainer.model.named_parameters())
    return result


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
    args = parser.parse_args(argv)

    from transformers.utils import logging as hf_logging

    from unlearn_methods.scaffolding.tofu_corpus import write_corpus

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch.use_deterministic_algorithms(True)
    ou = load_open_unlearning(Path(args.open_unlearning).resolve())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model_dir, tok = build_model(args.model, work)
        template_args = {"date_string": DATE} if "date_string" in (tok.chat_template or "") else {}
        data = batches(ou, tok, template_args, args.batch_size, max(1, args.steps), write_corpus(work / "data"))
        from transformers import AutoConfig

        rmu_layer = max(0, AutoConfig.from_pretrained(model_dir).num_hidden_layers // 2 - 1)
        print(f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()} ({os.cpu_count()} CPUs, load "
              f"{os.getloadavg()[0]:.2f}), model {args.model}, batch {args.batch_size}, {args.steps} steps, lr {args.lr:g}; "
              f"examples in OU's chat tokens (system prompt, {template_args or 'no template arguments'}): identical")
        print(f"{'case':<18} {'OU loss (step 1)':>17} {'ours':>17} {'|diff|':>9} {'max |dW|':>9} {'max dW vs OU':>13}")
        for case in cases(rmu_layer):
            if args.only and case[0] not in args.only:
                continue
            r = run_case(ou, case, model_dir, data, args.steps, args.lr, work)
            diff = max(abs(a - b) for a, b in zip(r["ou_losses"], r["our_losses"]))
            r["max_loss_diff"] = diff
            rows.append(r)
            print(f"{r['case']:<18} {r['ou_losses'][0]:>17.9g} {r['our_losses'][0]:>17.9g} {diff:>9.2e} "
                  f"{r['max_weight_change']:>9.2e} {r['max_weight_diff']:>13.2e}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
