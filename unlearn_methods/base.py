"""The method interface and the Trainer that runs any method.

A method is a small class with a ``loss(ctx, model, inputs)`` returning the scalar loss and a dict of named
terms to log, plus flags saying what it needs (a frozen reference model, refusal answers). The
:class:`UnlearnTrainer` is a plain Hugging Face ``Trainer`` whose ``compute_loss`` calls the method; the rest
(accelerate / DeepSpeed / FSDP, LoRA through PEFT, checkpointing, resuming) is the Trainer's.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from transformers import Trainer

from unlearn_methods.losses import forward
from unlearn_methods.params import MethodParams

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
        with torch.no_grad():
            if self.reference == ADAPTER_DISABLED:
                with self.trainer.model.disable_adapter():
                    return forward(self.trainer.model, batch, **kwargs)
            return forward(self.reference, batch, **kwargs)

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
    needs_reference: ClassVar[bool] = False  # its loss compares with the frozen model before unlearning
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
    Params: ClassVar[type[MethodParams]] = MethodParams

    def __init__(self, params: MethodParams | dict[str, Any] | None = None) -> None:
        self.params = params if isinstance(params, self.Params) else self.Params.from_dict(params, self.name)

    def loss(self, ctx: MethodContext, model, inputs: dict) -> tuple[torch.Tensor, dict[str, float]]:
        raise NotImplementedError

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


class UnlearnTrainer(Trainer):
    """``Trainer`` whose loss is an :class:`UnlearnMethod`, with an optional L1 penalty on LoRA weights."""

    def __init__(self, *args, method: UnlearnMethod, l1_lora: float = 0.0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.method = method
        self.l1_lora = l1_lora
        self.ctx = MethodContext(trainer=self, reference=self._make_reference() if method.needs_reference else None)
        self._terms: dict[str, list[float]] = {}

    def _make_reference(self):
        if hasattr(self.model, "disable_adapter"):  # LoRA: the base weights are the reference, no copy needed
            return ADAPTER_DISABLED
        ref = copy.deepcopy(self.model).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        return ref.to(self.args.device)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss, terms = self.method.loss(self.ctx, model, inputs)
        if self.l1_lora > 0:
            l1 = sum(p.abs().sum() for n, p in model.named_parameters() if "lora_" in n and p.requires_grad)
            loss = loss + self.l1_lora * l1
            terms["l1_lora"] = float(l1)
        if not torch.isfinite(loss):
            raise NonFiniteLossError(
                f"The {self.method.name} loss is {float(loss)} at step {self.state.global_step} "
                f"(terms: {terms}). Lower --lr, raise the method's beta, or use --lora; the last good weights are kept."
            )
        for k, v in terms.items():
            if isinstance(v, (int, float)) and math.isfinite(v):
                self._terms.setdefault(k, []).append(float(v))
        return (loss, None) if return_outputs else loss

    def log(self, logs: dict[str, float], *args, **kwargs) -> None:
        for k, values in self._terms.items():
            if values:
                logs[k] = sum(values) / len(values)
        self._terms = {}
        super().log(logs, *args, **kwargs)


