"""The method interface and the Trainer that runs any method.

A method is a small class with a ``loss(ctx, model, inputs)`` returning the scalar loss and a dict of named
terms to log, plus flags saying what it needs (a frozen reference model, refusal answers). The
:class:`UnlearnTrainer` is a plain Hugging Face ``Trainer`` whose ``compute_loss`` calls the method; the rest
(accelerate / DeepSpeed / FSDP, LoRA through PEFT, checkpointing, resuming) is the Trainer's.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from transformers import Trainer, TrainerCallback
from transformers.trainer_callback import ExportableState

from unlearn_methods import reference
from unlearn_methods.losses import NORM_KEY, REF_NLL_KEY, WEIGHT_KEY, answer_logits, forward
from unlearn_methods.params import MethodParams
from unlearn_methods.run_checkpoints import BackgroundCheckpoints

#: The kinds of forget example a method may declare (:attr:`UnlearnMethod.forget_corpus`).
FORGET_CORPORA = ("text", "pair", "refusal")


class NonFiniteLossError(RuntimeError):
    """The loss became NaN or infinite; raised before the optimiser step, so the weights are still the last good ones."""


#: ``MethodContext.reference`` of a LoRA model: the reference is the model itself with its adapter switched off
#: (``model.disable_adapter()``), so the base weights are not copied.
ADAPTER_DISABLED = "disable_adapter"


@dataclass
class MethodContext:
    """What a method's loss may use besides the model: the frozen reference and run-wide state."""

    trainer: Trainer
    reference: Any = None  # a callable model, ADAPTER_DISABLED, or None

    def reference_outputs(self, batch: dict, **kwargs):
        """Outputs of the frozen reference model (the model before unlearning) on ``batch``."""
        return self._with_reference(lambda model: forward(model, batch, **kwargs))

    def reference_answer_logits(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """:func:`~unlearn_methods.losses.answer_logits` of the frozen reference model on ``batch``."""
        return self._with_reference(lambda model: answer_logits(model, batch))

    def _with_reference(self, run: Callable[[Any], Any]) -> Any:
        if self.reference is None:
            raise RuntimeError("This run keeps no reference model: the method's needs_reference is False (its "
                               "reference_nll values come with the batch).")
        with torch.no_grad():
            if self.reference == ADAPTER_DISABLED:
                with self.trainer.model.disable_adapter():
                    return run(self.trainer.model)
            return run(self.reference)

    @property
    def step(self) -> int:
        return self.trainer.state.global_step


class UnlearnMethod:
    """Base class of every method. Subclasses set ``name``, ``summary``, ``paper`` and flags, declare their
    hyperparameters as a nested ``Params`` dataclass (see :mod:`unlearn_methods.params`), and implement :meth:`loss`.

    ``self.params`` is the parsed, validated ``Params`` instance; state a method keeps during a run lives in
    attributes it sets in its own ``__init__``.
    """

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    paper: ClassVar[str] = ""  # the paper the loss comes from
    #: Its loss runs the frozen model before unlearning (the reference) during training: a copy of it for full
    #: fine-tuning, the base weights with the adapter off for LoRA (KL terms, distillation, activations).
    needs_reference: ClassVar[bool] = False
    #: The parts of a batch (e.g. "forget") whose rows' reference summed answer NLL its loss uses: computed once
    #: before training and carried with each row (``batch[part][REF_NLL_KEY]``, :mod:`unlearn_methods.reference`),
    #: so no reference model is kept for it unless ``needs_reference`` is also true.
    reference_nll: ClassVar[tuple[str, ...]] = ()
    #: Its loss needs questions (a refusal, another item's or an alternate answer to them): not for raw text (MUSE).
    qa_only: ClassVar[bool] = False
    #: Available for vision-language models (--data clear); False for methods that fine-tune a text-only copy of
    #: the model or generate text with the tokenizer.
    vision: ClassVar[bool] = True
    #: The kind of forget example its loss learns from, where a data source offers several (RWKU's training
    #: corpora): "text" (texts to push away), "pair" (a question, the answer to push away and a preferred answer,
    #: ``forget_idk``), "refusal" (questions with the refusals to learn, ``forget_idk``); one of
    #: :data:`FORGET_CORPORA`.
    forget_corpus: ClassVar[str] = "text"
    #: Logged terms that are a state of the method (e.g. a dual variable), not a mean over the batch: logged as
    #: their last value, where the other terms are summed over the micro-batches of a step and averaged over processes.
    state_terms: ClassVar[tuple[str, ...]] = ()
    Params: ClassVar[type[MethodParams]] = MethodParams

    def __init__(self, params: MethodParams | dict[str, Any] | None = None) -> None:
        self.params = params if isinstance(params, self.Params) else self.Params.from_dict(params, self.name)

    def loss(self, ctx: MethodContext, model, inputs: dict) -> tuple[torch.Tensor, dict[str, float]]:
        raise NotImplementedError

    @classmethod
    def uses_reference(cls) -> bool:
        """Whether its loss compares with the frozen model before unlearning (per step or through values computed
        once): the catalogue's *reference model* column."""
        return cls.needs_reference or bool(cls.reference_nll)

    def counts(self, part: str, batch: dict) -> dict[str, torch.Tensor]:
        """Extra quantities of one micro-batch part that a mean of this method divides by (besides rows, answer tokens
        and positions), summed over the step's global batch by the trainer like those."""
        return {}

    def after_step(self, ctx: MethodContext, terms: dict[str, float]) -> None:
        """Called once per optimiser step with the step's logged terms over its global batch (e.g. a dual update)."""

    def on_epoch_end(self, ctx: MethodContext) -> None:
        """Called at the end of every training epoch (e.g. a dual update per epoch)."""

    # Hooks for methods that are more than a loss (Task Vector, WHP, AltPO).
    def prepare(self, run) -> None:
        """Called before training with the run (see :mod:`unlearn_methods.training`)."""

    def finalize(self, run, model):
        """Called after training; may return a replacement model."""
        return model

    @property
    def trains(self) -> bool:
        """False for methods that only do weight arithmetic after :meth:`prepare`."""
        return True


class UnlearnTrainer(BackgroundCheckpoints, Trainer):
    """``Trainer`` whose loss is an :class:`UnlearnMethod`, with an optional L1 penalty on LoRA weights; each step
    normalised over its global batch (see the module docstring); its checkpoints written beside the steps
    (:mod:`unlearn_methods.run_checkpoints`)."""

    #: compute_loss divides by the step's global counts, gradient accumulation included (see get_batch_samples)
    loss_is_scaled_for_ga = True

    def __init__(self, *args, method: UnlearnMethod, l1_lora: float = 0.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.method = method
        if method.reference_nll and self.train_dataset is not None and not isinstance(self.train_dataset,
                                                                                      reference.WithReference):
            # the run's training set comes with its values (unlearn_methods.training); any other, computed here
            self.train_dataset, self.data_collator, _ = reference.attach(
                self.model, self.train_dataset, self.data_collator, method.reference_nll,
                self.args.per_device_train_batch_size)
        self.l1_lora = l1_lora
        self.ctx = MethodContext(trainer=self, reference=self._make_reference() if method.needs_reference else None)
        self._terms: dict[str, list[float]] = {}
        self._step_terms: dict[str, float] = {}  # this step's terms, summed over its micro-batches on this process
        self._micro_batches = 1  # of the current step, on every process
        self.add_callback(_EpochEnd(self))
        self.add_callback(RunLayout())

    def _make_reference(self):
        """The frozen copy of the model before unlearning; under FSDP2 sharded over the processes as accelerate shards
        the model (each holds its part, a layer gathered while it runs), not kept whole on each."""
        if hasattr(self.model, "disable_adapter"):  # LoRA: the base weights are the reference, no copy needed
            return ADAPTER_DISABLED
        ref = copy.deepcopy(self.model).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        if self.is_fsdp_enabled and self.accelerator.is_fsdp2:
            return self.accelerator.prepare(ref)
        return ref.to(self.args.device)

    # ------------------------------------------------------------------ the global batch of a step
    def _epoch_positions(self, micro: int, rows: int) -> torch.Tensor:
        """Positions in the epoch's sample order of the rows of this process's ``micro``-th micro-batch of the step.

        accelerate gives batch ``b`` of the sampler to process ``b % N`` and, so that every process steps together,
        completes the epoch's last batches with samples from its start; those have positions past the dataset."""
        n, procs = len(self.train_dataset), self.accelerator.num_processes
        size, accum = self.args.train_batch_size, self.args.gradient_accumulation_steps  # x GPUs under DataParallel
        batches_per_process = math.ceil(math.ceil(n / size) / procs)
        steps_per_epoch = max(1, math.ceil(batches_per_process / accum))
        batch = ((self.state.global_step % steps_per_epoch) * accum + micro) * procs + self.accelerator.process_index
        return batch * size + torch.arange(rows)

    def get_batch_samples(self, epoch_iterator: Iterator, num_batches: int, device: torch.device):
        self._flush_step_terms()
        batches, _ = super().get_batch_samples(epoch_iterator, num_batches, device)
        if not batches or not isinstance(batches[0], dict) or not all(isinstance(v, dict) for v in batches[0].values()):
            return batches, None
        n = len(self.train_dataset) if self.train_dataset is not None and hasattr(self.train_dataset, "__len__") else None
        local: dict[str, dict[str, torch.Tensor]] = {}
        for micro, batch in enumerate(batches):
            for part, b in batch.items():
                rows = b["input_ids"].shape[0]
                weight = torch.ones(rows)
                if n is not None:
                    weight = (self._epoch_positions(micro, rows) < n).float()
                weight = weight.to(b["input_ids"].device)
                b[WEIGHT_KEY] = weight
                if "labels" in b and not bool(weight.all()):
                    b["labels"] = b["labels"].masked_fill(weight[:, None] == 0, -100)
                    if REF_NLL_KEY in b:  # as the reference's NLL of a row without answer tokens
                        b[REF_NLL_KEY] = b[REF_NLL_KEY] * weight.to(b[REF_NLL_KEY].dtype)
                mask = b.get("attention_mask", torch.ones_like(b["input_ids"]))
                counts = {"rows": weight.sum(), "positions": (mask * weight[:, None]).sum().float()}
                if "labels" in b:
                    counts["tokens"] = (b["labels"][:, 1:] != -100).sum().float()
                counts.update({k: v.float() for k, v in self.method.counts(part, b).items()})
                for k, v in counts.items():
                    acc = local.setdefault(part, {})
                    acc[k] = acc.get(k, 0) + v.detach().float().cpu()
        names = [(part, k) for part in sorted(local) for k in sorted(local[part])]
        totals = torch.stack([local[part][k] for part, k in names]).to(self.args.device)
        totals = self.accelerator.reduce(totals, reduction="sum") if self.accelerator.num_processes > 1 else totals
        # each process's share of the global count: the processes' gradients are averaged, so dividing the local sum
        # by count / N makes the average the sum over the global batch divided by its count
        share = (totals / self.accelerator.num_processes).clamp_min(1e-12)
        norms: dict[str, dict[str, torch.Tensor]] = {}
        for (part, k), v in zip(names, share):
            norms.setdefault(part, {})[k] = v
        for batch in batches:
            for part, b in batch.items():
                b[NORM_KEY] = {k: v.to(b["input_ids"].device) for k, v in norms[part].items()}
        self._micro_batches = len(batches)
        return batches, None

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss, terms = self.method.loss(self.ctx, model, inputs)
        if self.l1_lora > 0:
            l1 = sum(p.abs().sum() for n, p in model.named_parameters() if "lora_" in n and p.requires_grad)
            # once per step: every micro-batch adds its share, as if the penalty were a mean over the step
            loss = loss + self.l1_lora * l1 / self._micro_batches
            terms["l1_lora"] = float(l1) / self._micro_batches
        self._check_finite(loss, terms)
        for k, v in terms.items():
            if isinstance(v, (int, float)):
                if k in self.method.state_terms:
                    self._step_terms[k] = float(v)
                else:
                    self._step_terms[k] = self._step_terms.get(k, 0.0) + float(v)
        return (loss, None) if return_outputs else loss

    def _check_finite(self, loss: torch.Tensor, terms: dict[str, Any]) -> None:
        """Raise :class:`NonFiniteLossError` before the backward pass when the loss is NaN or infinite. Under a
        launcher every process learns every process's loss first, so all stop together with the same message (one
        process stopping alone would leave the others waiting for its gradients)."""
        procs = self.accelerator.num_processes
        if procs == 1:
            losses = [float(loss.detach())]
        else:
            losses = self.accelerator.gather(loss.detach().float().reshape(1)).tolist()
        bad = [i for i, value in enumerate(losses) if not math.isfinite(value)]
        if not bad:
            return
        if procs > 1:
            from accelerate.utils import gather_object

            terms = gather_object([terms])[bad[0]]  # the first failing process's terms, on every process
        where = f" on process {', '.join(map(str, bad))} of {procs}" if procs > 1 else ""
        raise NonFiniteLossError(
            f"The {self.method.name} loss is {losses[bad[0]]}{where} at step {self.state.global_step} "
            f"(terms: {terms}). Lower --lr, raise the method's beta, or use --lora; the last good weights are kept."
        )

    def _flush_step_terms(self) -> None:
        """The finished step's terms over its global batch (averaged over processes): to the log and the method."""
        if not self._step_terms:
            return
        keys = sorted(self._step_terms)
        values = torch.tensor([self._step_terms[k] for k in keys], dtype=torch.float64)
        if self.accelerator.num_processes > 1:
            values = self.accelerator.reduce(values.to(self.args.device), reduction="mean").cpu()
        step = dict(zip(keys, values.tolist()))
        self._step_terms = {}
        self.method.after_step(self.ctx, step)
        for k, v in step.items():
            if math.isfinite(v):
                self._terms.setdefault(k, []).append(v)

    def log(self, logs: dict[str, float], *args, **kwargs) -> None:
        self._flush_step_terms()
        for k, values in self._terms.items():
            if values:
                logs[k] = sum(values) / len(values)
        self._terms = {}
        super().log(logs, *args, **kwargs)


class _EpochEnd(TrainerCallback):
    """Calls the method's :meth:`UnlearnMethod.on_epoch_end` at the end of each epoch."""

    def __init__(self, trainer: UnlearnTrainer) -> None:
        self.trainer = trainer

    def on_epoch_end(self, args, state, control, **kwargs):
        self.trainer._flush_step_terms()  # the epoch's last step reaches after_step first
        self.trainer.method.on_epoch_end(self.trainer.ctx)


class RunLayout(TrainerCallback, ExportableState):
    """How the steps of a run are made: ``processes`` x ``batch_size`` rows x ``grad_accum`` micro-batches, stored with
    each checkpoint (``trainer_state.json``, the Trainer's stateful callbacks) for ``--resume`` on another process
    count, which then reads the layout the checkpoint was written with, not the settings of a later, unfinished try."""

    def __init__(self) -> None:
        self.layout: dict[str, int] = {}

    def on_train_begin(self, args, state, control, **kwargs):
        self.layout = {"processes": args.world_size, "batch_size": args.per_device_train_batch_size,
                       "grad_accum": args.gradient_accumulation_steps}

    def state(self) -> dict:
        return {"args": {}, "attributes": {"layout": dict(self.layout)}}
