"""The unlearning methods. Each is a loss over a batch ``{"forget", "retain", "forget_idk", "forget_random"[,
"forget_alternate"]}`` (see :mod:`unlearn_methods.forget_retain`), a ``Params`` dataclass of its typed hyperparameters
(:mod:`unlearn_methods.params`), and one ``@register`` line. Weights: ``gamma`` on the forget term, ``alpha`` on the
retain term, unless a method says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from unlearn_methods.base import MethodContext, UnlearnMethod
from unlearn_methods.losses import (
    NORM_KEY,
    REF_NLL_KEY,
    WEIGHT_KEY,
    answer_logits,
    answer_mask,
    batch_mean,
    forward,
    kl_to_reference,
    masked_mean,
    mean_nll,
    position_mask,
    row_weight,
    sequence_nll,
    share,
    soft_cross_entropy,
    token_nll,
)
from unlearn_methods.params import MethodParams, param
from unlearn_methods.registry import register


def _logged(t: torch.Tensor) -> float:
    """A loss term as a plain number for logging."""
    return float(t.detach())


def _nll(model, batch) -> torch.Tensor:
    return mean_nll(*answer_logits(model, batch), batch)


def _kl(ctx: MethodContext, model, batch) -> torch.Tensor:
    """KL(reference || model) averaged over the answer positions of ``batch``."""
    logits, labels = answer_logits(model, batch)
    return kl_to_reference(logits, ctx.reference_answer_logits(batch)[0], labels, batch)


@dataclass
class ForgetRetain(MethodParams):
    """The forget / retain term weights most methods share."""

    gamma: float = param(1.0, "weight of the forget term", ge=0)
    alpha: float = param(1.0, "weight of the retain term", ge=0)


@dataclass
class Preference(ForgetRetain):
    """Forget / retain weights plus the inverse temperature of a preference loss."""

    beta: float = param(0.1, "inverse temperature of the preference loss (it divides the loss)", gt=0)


@register
class GradientAscent(UnlearnMethod):
    name = "ga"
    summary = "Gradient Ascent: maximise the NLL of the forget answers."
    paper = "Jang et al., Knowledge Unlearning for Mitigating Privacy Risks in Language Models, ACL 2023"

    def loss(self, ctx, model, inputs):
        forget = _nll(model, inputs["forget"])
        return -forget, {"forget_nll": _logged(forget)}


#: What ``retain_loss=kl`` divides by: the positions of the retain batch, padding included (filler rows left out).
_KL_POSITIONS = "kl_positions"


def _kl_all_positions(ctx: MethodContext, model, batch: dict) -> torch.Tensor:
    """KL(reference || model) of the next-token distributions at every position of ``batch`` (prompt, answer and
    padding; the last position too), averaged over the positions: open-unlearning's ``compute_kl_divergence``
    (``kl_div(..., reduction="batchmean")`` over the [B * T, V] log-probabilities), as TOFU's code computes its KL."""
    logp = F.log_softmax(forward(model, batch).logits.float(), -1)
    ref_logp = F.log_softmax(ctx.reference_outputs(batch).logits.float(), -1)
    kl = (ref_logp.exp() * (ref_logp - logp)).sum(-1)  # [B, T]
    weight = row_weight(batch, kl[:, 0])
    return (kl * weight[:, None]).sum() / share(batch, _KL_POSITIONS, weight.sum() * kl.shape[1])


@dataclass
class RetainLoss(MethodParams):
    """The retain term's kind, as open-unlearning's ``retain_loss_type``."""

    retain_loss: str = param("nll", "the retain term: nll = NLL of the retain answers; kl = KL(original || model) "
                             "averaged over every position of the retain sequences, prompt and padding included (the "
                             "frozen original model is kept), as open-unlearning's retain_loss_type: KL",
                             choices=("nll", "kl"))


class _RetainTerm(UnlearnMethod):
    """A method whose retain term is the NLL or open-unlearning's KL (``Params.retain_loss``)."""

    def __init__(self, params=None) -> None:
        super().__init__(params)
        if self.params.retain_loss == "kl":
            self.needs_reference = True

    def counts(self, part, batch):
        if part != "retain" or self.params.retain_loss != "kl":
            return {}
        weight = batch.get(WEIGHT_KEY, torch.ones(batch["input_ids"].shape[0]))
        return {_KL_POSITIONS: weight.sum() * batch["input_ids"].shape[1]}

    def retain_term(self, ctx: MethodContext, model, batch: dict) -> tuple[torch.Tensor, dict[str, float]]:
        """(the retain term, its logged value by name)."""
        if self.params.retain_loss == "kl":
            kl = _kl_all_positions(ctx, model, batch)
            return kl, {"retain_kl": _logged(kl)}
        nll = _nll(model, batch)
        return nll, {"retain_nll": _logged(nll)}


@register
class GradientDifference(_RetainTerm):
    name = "graddiff"
    summary = "Gradient Difference: ascent on forget, descent on retain."
    paper = "Liu et al., Continual Learning and Private Unlearning, CoLLAs 2022"

    @dataclass
    class Params(RetainLoss, ForgetRetain):
        pass

    def loss(self, ctx, model, inputs):
        p = self.params
        forget = _nll(model, inputs["forget"])
        retain, logged = self.retain_term(ctx, model, inputs["retain"])
        return -p.gamma * forget + p.alpha * retain, {"forget_nll": _logged(forget), **logged}


@register
class KLMinimisation(UnlearnMethod):
    name = "kl"
    summary = "KL minimisation: ascent on forget, KL(original || model) on retain."
    paper = "Maini et al., TOFU: A Task of Fictitious Unlearning for LLMs, 2024"
    needs_reference = True
    Params = ForgetRetain

    def loss(self, ctx, model, inputs):
        p = self.params
        forget = _nll(model, inputs["forget"])
        kl = _kl(ctx, model, inputs["retain"])
        return -p.gamma * forget + p.alpha * kl, {"forget_nll": _logged(forget), "retain_kl": _logged(kl)}


@register
class IDKFinetune(UnlearnMethod):
    name = "idk"
    forget_corpus = "refusal"
    qa_only = True
    summary = "IDK fine-tuning: learn refusals on forget questions, keep retain answers."
    paper = "Maini et al., TOFU: A Task of Fictitious Unlearning for LLMs, 2024"
    Params = ForgetRetain

    def loss(self, ctx, model, inputs):
        p = self.params
        idk, retain = _nll(model, inputs["forget_idk"]), _nll(model, inputs["retain"])
        return p.gamma * idk + p.alpha * retain, {"idk_nll": _logged(idk), "retain_nll": _logged(retain)}


def _log_ratio(ctx: MethodContext, model, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(log pi(y|x) - log pi_ref(y|x) per sequence, model's summed NLL per sequence). The reference's NLL comes
    with the batch when computed before training (``reference_nll``), else from a forward of the reference."""
    nll, _ = sequence_nll(*answer_logits(model, batch))
    if REF_NLL_KEY in batch:
        ref_nll = batch[REF_NLL_KEY].to(nll.device, nll.dtype)
    else:
        ref_nll, _ = sequence_nll(*ctx.reference_answer_logits(batch))
    return ref_nll - nll, nll


@register
class DPO(UnlearnMethod):
    name = "dpo"
    forget_corpus = "pair"
    qa_only = True
    summary = "DPO preferring a refusal (win) over the forget answer (lose), plus retain NLL."
    paper = "Rafailov et al., Direct Preference Optimization, NeurIPS 2023 (refusal as winner: Maini et al., TOFU)"
    reference_nll = ("forget_idk", "forget")
    Params = Preference

    def loss(self, ctx, model, inputs):
        p = self.params
        win, _ = _log_ratio(ctx, model, inputs["forget_idk"])
        lose, _ = _log_ratio(ctx, model, inputs["forget"])
        dpo = batch_mean(-2.0 / p.beta * F.logsigmoid(p.beta * (win - lose)), inputs["forget"])
        retain = _nll(model, inputs["retain"])
        return p.gamma * dpo + p.alpha * retain, {"dpo": _logged(dpo), "retain_nll": _logged(retain)}


@register
class NPO(_RetainTerm):
    name = "npo"
    summary = "Negative Preference Optimisation: -2/beta * logsigmoid(beta * (NLL - NLL_ref)) on forget, plus retain NLL."
    paper = "Zhang et al., Negative Preference Optimization, COLM 2024"
    reference_nll = ("forget",)

    @dataclass
    class Params(RetainLoss, Preference):
        pass

    def loss(self, ctx, model, inputs):
        p = self.params
        log_ratio, nll = _log_ratio(ctx, model, inputs["forget"])
        f = inputs["forget"]
        npo = batch_mean(-2.0 / p.beta * F.logsigmoid(-p.beta * log_ratio), f)
        retain, logged = self.retain_term(ctx, model, inputs["retain"])
        return p.gamma * npo + p.alpha * retain, {"npo": _logged(npo), "forget_seq_nll": _logged(batch_mean(nll, f)),
                                                  **logged}


@register
class SimNPO(UnlearnMethod):
    name = "simnpo"
    summary = "SimNPO: reference-free NPO on the length-normalised NLL, -2/beta * logsigmoid(beta * (avgNLL - delta))."
    paper = "Fan et al., Simplicity Prevails: Rethinking Negative Preference Optimization for LLM Unlearning, 2024"

    @dataclass
    class Params(Preference):
        gamma: float = param(0.125, "weight of the forget term", ge=0)
        beta: float = param(4.5, "inverse temperature (it divides the loss)", gt=0)
        delta: float = param(0.0, "reward margin subtracted from the mean-token NLL")

    def loss(self, ctx, model, inputs):
        p = self.params
        f = inputs["forget"]
        nll, n = sequence_nll(*answer_logits(model, f))
        simnpo = batch_mean(-2.0 / p.beta * F.logsigmoid(p.beta * (nll / n - p.delta)), f)
        retain = _nll(model, inputs["retain"])
        return p.gamma * simnpo + p.alpha * retain, {"simnpo": _logged(simnpo), "retain_nll": _logged(retain)}


@register
class SCRUB(UnlearnMethod):
    name = "scrub"
    summary = ("SCRUB: the original model is a teacher; 'max' steps push the student away from it on forget, "
               "'min' steps keep it close (KL) and accurate (NLL) on retain.")
    paper = "Kurmanji et al., Towards Unbounded Machine Unlearning, NeurIPS 2023"
    needs_reference = True

    @dataclass
    class Params(ForgetRetain):
        max_every: int = param(2, "a 'max' (forget) step every this many steps", ge=1)
        max_fraction: float = param(0.5, "max steps only in this first fraction of training", ge=0, le=1)

    def is_max_step(self, ctx: MethodContext) -> bool:
        total = max(1, ctx.trainer.state.max_steps or 1)
        return ctx.step < self.params.max_fraction * total and ctx.step % self.params.max_every == 0

    def loss(self, ctx, model, inputs):
        if self.is_max_step(ctx):
            kl = _kl(ctx, model, inputs["forget"])
            return -self.params.gamma * kl, {"forget_kl": _logged(kl)}
        r = inputs["retain"]
        logits, labels = answer_logits(model, r)
        kl = kl_to_reference(logits, ctx.reference_answer_logits(r)[0], labels, r)
        nll = mean_nll(logits, labels, r)
        return kl + self.params.alpha * nll, {"retain_kl": _logged(kl), "retain_nll": _logged(nll)}


@register
class LLMU(UnlearnMethod):
    name = "llmu"
    forget_corpus = "pair"
    qa_only = True
    summary = ("LLMU (Yao et al.): ascent on forget, descent on forget questions paired with random answers, "
               "KL(original || model) on retain.")
    paper = "Yao et al., Large Language Model Unlearning, NeurIPS 2024"
    needs_reference = True

    @dataclass
    class Params(MethodParams):
        eps_forget: float = param(1.0, "weight of the forget ascent term", ge=0)
        eps_random: float = param(1.0, "weight of the random-answer descent term", ge=0)
        eps_retain: float = param(1.0, "weight of the retain KL term", ge=0)

    def loss(self, ctx, model, inputs):
        p = self.params
        forget, mismatch = _nll(model, inputs["forget"]), _nll(model, inputs["forget_random"])
        kl = _kl(ctx, model, inputs["retain"])
        total = -p.eps_forget * forget + p.eps_random * mismatch + p.eps_retain * kl
        return total, {"forget_nll": _logged(forget), "random_nll": _logged(mismatch), "retain_kl": _logged(kl)}


@register
class RMU(UnlearnMethod):
    name = "rmu"
    summary = ("RMU: steer the chosen layer's activations on forget text toward a fixed random vector; keep them "
               "equal to the original model's on retain text.")
    paper = "Li et al., The WMDP Benchmark: Measuring and Reducing Malicious Use With Unlearning, ICML 2024"
    needs_reference = True

    @dataclass
    class Params(MethodParams):
        layer: int = param(-1, "the layer whose activations are steered (-1: the middle one)", ge=-1)
        steering_coeff: float = param(2.0, "length of the random target vector", ge=0)
        alpha: float = param(1.0, "weight of the retain term", ge=0)
        seed: int = param(0, "seed of the random direction")
        positions: str = param("tokens", "where the activation MSE is averaged: tokens = every token of the batch "
                               "(one mean); open_unlearning = the answer tokens (labelled positions), as "
                               "open-unlearning's RMU normalises them: the batch mean of each sequence's summed "
                               "error times the batch mean of 1 / its answer length (its [b] / [b, 1] broadcast; "
                               "the per-sequence mean when all answers are equally long)",
                               choices=("tokens", "open_unlearning"))

    def __init__(self, params=None) -> None:
        super().__init__(params)
        self.direction: torch.Tensor | None = None  # the fixed random unit vector, drawn at the first step

    def _mse(self, h: torch.Tensor, target: torch.Tensor, batch: dict) -> torch.Tensor:
        """Mean squared difference of activations ``h`` to ``target`` over the positions of :attr:`Params.positions`."""
        if self.params.positions == "open_unlearning":
            mask = (batch["labels"] != -100).to(h.dtype)
            summed = (((h - target) ** 2).mean(-1) * mask).sum(-1)  # per sequence
            return summed.mean() * (1 / mask.sum(-1).clamp_min(1)).mean()
        mask = position_mask(batch).unsqueeze(-1).to(h.dtype)
        return (((h - target) ** 2) * mask).sum() / (share(batch, "positions", mask.sum()) * h.shape[-1])

    def _hidden(self, out, n_layers: int) -> torch.Tensor:
        layer = self.params.layer if self.params.layer >= 0 else n_layers // 2
        return out.hidden_states[layer + 1]  # hidden_states[0] is the embedding output

    def loss(self, ctx, model, inputs):
        f, r = inputs["forget"], inputs["retain"]
        out_f = forward(model, f, output_hidden_states=True, logits_to_keep=1)  # the logits are not used
        n_layers = len(out_f.hidden_states) - 1
        h_f = self._hidden(out_f, n_layers)
        if self.direction is None:
            g = torch.Generator().manual_seed(int(self.params.seed))
            u = torch.rand(h_f.shape[-1], generator=g)
            self.direction = u / u.norm()
        target = (self.params.steering_coeff * self.direction).to(h_f.device, h_f.dtype)
        forget = self._mse(h_f, target, f)
        h_r = self._hidden(forward(model, r, output_hidden_states=True, logits_to_keep=1), n_layers)
        h_ref = self._hidden(ctx.reference_outputs(r, output_hidden_states=True, logits_to_keep=1), n_layers)
        retain = self._mse(h_r, h_ref, r)
        return forget + self.params.alpha * retain, {"forget_mse": _logged(forget), "retain_mse": _logged(retain)}


@register
class RetainFinetune(UnlearnMethod):
    name = "retain_ft"
    summary = "Retain fine-tuning: keep training on the retain set only (a baseline)."
    paper = "Maini et al., TOFU: A Task of Fictitious Unlearning for LLMs, 2024"

    def loss(self, ctx, model, inputs):
        retain = _nll(model, inputs["retain"])
        return retain, {"retain_nll": _logged(retain)}


@register
class TaskVector(UnlearnMethod):
    name = "task_vector"
    vision = False
    summary = ("Task Vector negation: fine-tune a copy on the forget set, then subtract alpha times the weight "
               "change from the original model.")
    paper = "Ilharco et al., Editing Models with Task Arithmetic, ICLR 2023"

    @dataclass
    class Params(MethodParams):
        alpha: float = param(1.0, "scale of the subtracted task vector", ge=0)
        reinforce_epochs: float = param(5.0, "epochs of fine-tuning the reinforced copy on forget", gt=0)
        reinforce_lr: float | None = param(None, "learning rate of that fine-tuning (default: --lr)", gt=0)

    def __init__(self, params=None) -> None:
        super().__init__(params)
        self.reinforced = None  # the copy fine-tuned on forget, built by prepare()

    @property
    def trains(self) -> bool:
        return False

    def prepare(self, run) -> None:
        self.reinforced = run.reinforced_model(self.params.reinforce_epochs, self.params.reinforce_lr)

    def finalize(self, run, model):
        reinforced, self.reinforced = self.reinforced.state_dict(), None
        with torch.no_grad():
            for name, weight in run.base_model_for_arithmetic().state_dict().items():
                if name in reinforced and weight.dtype.is_floating_point:
                    weight.sub_(self.params.alpha * (reinforced[name].to(weight.device) - weight))
        return run.base_model_for_arithmetic()


@register
class WhosHarryPotter(UnlearnMethod):
    name = "whp"
    vision = False
    summary = ("Who's Harry Potter: fine-tune a reinforced copy on the forget set; train the model toward the "
               "generic prediction softmax(v_base - alpha * relu(v_reinforced - v_base)) on forget text. "
               "The logit combination is distilled into the weights, so the result is an ordinary checkpoint.")
    paper = "Eldan & Russinovich, Who's Harry Potter? Approximate Unlearning in LLMs, 2023"
    needs_reference = True

    @dataclass
    class Params(MethodParams):
        alpha: float = param(1.0, "how far the generic logits move away from the reinforced model's", ge=0)
        reinforce_epochs: float = param(5.0, "epochs of fine-tuning the reinforced copy on forget", gt=0)
        reinforce_lr: float | None = param(None, "learning rate of that fine-tuning (default: --lr)", gt=0)
        retain_weight: float = param(0.0, "weight of an optional retain NLL term", ge=0)

    def __init__(self, params=None) -> None:
        super().__init__(params)
        self.reinforced = None  # the frozen copy fine-tuned on forget, built by prepare()

    def prepare(self, run) -> None:
        reinforced = run.reinforced_model(self.params.reinforce_epochs, self.params.reinforce_lr).eval()
        for weight in reinforced.parameters():
            weight.requires_grad_(False)
        self.reinforced = reinforced

    def loss(self, ctx, model, inputs):
        f = inputs["forget"]
        base = ctx.reference_answer_logits(f)[0].float()
        reinforced_model = self.reinforced.to(base.device)
        with torch.no_grad():
            reinforced = answer_logits(reinforced_model, f)[0].float()
        generic = F.softmax(base - self.params.alpha * F.relu(reinforced - base), -1)[:, :-1]
        logits, labels = answer_logits(model, f)
        logp = F.log_softmax(logits[:, :-1].float(), -1)
        mask = (labels[:, 1:] != -100).float()
        distill = -((generic * logp).sum(-1) * mask).sum() / share(f, "tokens", mask.sum())
        terms = {"generic_ce": _logged(distill)}
        if self.params.retain_weight:
            retain = _nll(model, inputs["retain"])
            terms["retain_nll"] = _logged(retain)
            distill = distill + self.params.retain_weight * retain
        return distill, terms


# ---------------------------------------------------------------------------------------------------------------------
# Methods open-unlearning ships (issue 21). Where its implementation differs from the paper, the paper is followed and
# the difference is said in the docstring (and in the README's methods table).


def _token_terms(model, batch, all_positions: bool = False
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(per-token NLL [B, T'-1], answer mask, logits [B, T', V], labels [B, T']) of ``model`` on ``batch``, from
    the first position that predicts an answer token (:func:`~unlearn_methods.losses.answer_logits`), or from the
    first position with ``all_positions``."""
    if all_positions:
        logits, labels = forward(model, batch).logits, batch["labels"]
    else:
        logits, labels = answer_logits(model, batch)
    nll, mask = token_nll(logits, labels)
    return nll, mask, logits, labels


@register
class UNDIAL(UnlearnMethod):
    """Self-distillation toward the original model's next-token distribution with the logit of the answer token
    lowered by ``beta``: CE(softmax(z_original - beta * onehot(y)), p_model) over the forget answer tokens.

    The paper distils on forget data only (``alpha`` = 0, its default). open-unlearning's version averages the
    distillation over every position of the sequence (prompt and padding included, where its indexing with the
    label -100 lowers vocabulary entry V - 100): ``all_positions=true`` reproduces it; by default only answer tokens
    are distilled, as in the paper.
    """

    name = "undial"
    summary = ("UNDIAL: self-distillation toward the original model's distribution with the answer token's logit "
               "lowered by beta.")
    paper = "Dong et al., UNDIAL: Self-Distillation with Adjusted Logits for Robust Unlearning in LLMs, NAACL 2025"
    needs_reference = True

    @dataclass
    class Params(ForgetRetain):
        alpha: float = param(0.0, "weight of a retain NLL term (the paper uses none)", ge=0)
        beta: float = param(10.0, "how much the teacher's logit of the answer token is lowered", ge=0)
        all_positions: bool = param(False, "distil every position, prompt and padding too, lowering vocabulary entry "
                                    "V - 100 where there is no answer token (open-unlearning's UNDIAL)")

    def loss(self, ctx, model, inputs):
        p, f = self.params, inputs["forget"]
        nll, mask, logits, labels = _token_terms(model, f, p.all_positions)
        teacher = (ctx.reference_outputs(f).logits if p.all_positions else ctx.reference_answer_logits(f)[0])
        teacher, labels = teacher[:, :-1].float(), labels[:, 1:]
        # open-unlearning indexes the vocabulary with the label itself, so -100 selects entry V - 100
        answer = (labels % teacher.shape[-1] if p.all_positions else labels.clamp_min(0)).unsqueeze(-1)
        target = F.softmax(teacher.scatter_add(-1, answer, torch.full_like(answer, -p.beta, dtype=teacher.dtype)), -1)
        ce = soft_cross_entropy(logits[:, :-1], target)
        undial = ce.mean() if p.all_positions else masked_mean(ce, mask, f)
        terms = {"undial_ce": _logged(undial), "forget_nll": _logged(masked_mean(nll, mask, f))}
        loss = p.gamma * undial
        if p.alpha:
            retain = _nll(model, inputs["retain"])
            terms["retain_nll"] = _logged(retain)
            loss = loss + p.alpha * retain
        return loss, terms


def _weighted_ascent(model, batch, weight) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean over answer tokens of weight(p) * log p, with the weight not differentiated; mean token NLL)."""
    nll, mask, _, _ = _token_terms(model, batch)
    prob = torch.exp(-nll.detach())
    return masked_mean(-weight(prob) * nll, mask, batch), masked_mean(nll, mask, batch)


@register
class WGA(UnlearnMethod):
    """Weighted Gradient Ascent: gradient ascent on each forget answer token weighted by its probability p^beta
    (not differentiated), so tokens already unlikely stop driving the update. Same formula as open-unlearning."""

    name = "wga"
    summary = "WGA: gradient ascent with each forget token weighted by p^beta, plus retain NLL."
    paper = "Wang et al., Rethinking LLM Unlearning Objectives: A Gradient Perspective and Go Beyond, ICLR 2025"

    @dataclass
    class Params(ForgetRetain):
        beta: float = param(1.0, "exponent of the token-probability weight p^beta", ge=0)

    def loss(self, ctx, model, inputs):
        p = self.params
        wga, forget_nll = _weighted_ascent(model, inputs["forget"], lambda prob: prob ** p.beta)
        retain = _nll(model, inputs["retain"])
        return p.gamma * wga + p.alpha * retain, {"wga": _logged(wga), "forget_nll": _logged(forget_nll), "retain_nll": _logged(retain)}


@register
class SatImp(UnlearnMethod):
    """SatImp: gradient ascent with each forget answer token weighted by p^beta1 * (1 - p)^beta2 (not
    differentiated): saturation (p^beta1) and importance ((1 - p)^beta2) reweighting. Defaults are the authors'
    (forget + 0.1 * retain NLL); open-unlearning's SatImp config swaps the weights (gamma 0.1, alpha 1.0)."""

    name = "satimp"
    summary = "SatImp: gradient ascent with each forget token weighted by p^beta1 (1-p)^beta2, plus retain NLL."
    paper = "Yang et al., Exploring Criteria of Loss Reweighting to Enhance LLM Unlearning, ICML 2025"

    @dataclass
    class Params(ForgetRetain):
        alpha: float = param(0.1, "weight of the retain term", ge=0)
        beta1: float = param(5.0, "saturation exponent (weight p^beta1)", ge=0)
        beta2: float = param(1.0, "importance exponent (weight (1 - p)^beta2)", ge=0)

    def loss(self, ctx, model, inputs):
        p = self.params
        satimp, forget_nll = _weighted_ascent(model, inputs["forget"],
                                              lambda prob: prob ** p.beta1 * (1 - prob) ** p.beta2)
        retain = _nll(model, inputs["retain"])
        return (p.gamma * satimp + p.alpha * retain,
                {"satimp": _logged(satimp), "forget_nll": _logged(forget_nll), "retain_nll": _logged(retain)})


@register
class CEU(UnlearnMethod):
    """Cross-entropy unlearning: the target at each forget answer token is the model's own next-token distribution
    (not differentiated) with the true token's logit set to -inf; the loss is the cross-entropy to that target.
    The first ``ignore_first_n`` answer tokens are left out (the paper's footnote). No reference model, no retain
    data, as in the paper and open-unlearning."""

    name = "ceu"
    summary = "CE-U: cross-entropy to the model's own distribution with the true token excluded from the softmax."
    paper = "Yang, CE-U: Cross Entropy Unlearning, 2025 (arXiv:2503.01224)"

    @dataclass
    class Params(MethodParams):
        ignore_first_n: int = param(1, "answer tokens at the start left out of the loss", ge=0)

    def _kept(self, labels: torch.Tensor) -> torch.Tensor:
        mask = answer_mask(labels)
        return mask & (mask.cumsum(-1) > self.params.ignore_first_n)

    def counts(self, part, batch):
        return {"ceu_kept": self._kept(batch["labels"]).sum()} if part == "forget" else {}

    def loss(self, ctx, model, inputs):
        f = inputs["forget"]
        nll, mask, logits, labels = _token_terms(model, f)
        logits = logits[:, :-1].float()
        keep = self._kept(labels)
        excluded = logits.detach().scatter(-1, labels[:, 1:].clamp_min(0).unsqueeze(-1), float("-inf"))
        ceu = masked_mean(soft_cross_entropy(logits, F.softmax(excluded, -1)), keep, f, "ceu_kept")
        return ceu, {"ceu": _logged(ceu), "forget_nll": _logged(masked_mean(nll, mask, f))}


@register
class PDU(UnlearnMethod):
    """Primal-dual unlearning: minimise the logit-margin flattening loss (max logit - mean logit)^2 on forget
    subject to retain NLL <= ``retain_eps``, by gradient steps on the Lagrangian
    ``gamma * margin + lambda * (retain NLL - retain_eps)`` and a dual ascent step per training step,
    ``lambda <- max(0, lambda + dual_step_size * (retain NLL - retain_eps))`` once ``dual_warmup_epochs`` are done.
    Defaults: the paper's TOFU settings (lambda starts at 100, eps 0.3, step 5, 5 warm-up epochs).

    The margin is taken over the logits that predict the answer tokens; ``all_positions=true`` takes it over every
    position of the forget sequence (prompt and padding included: its mean counts padding and so depends on how the
    batch is split over processes); ``ou_positions=true`` over the logits at the answer tokens' own positions (labels
    not shifted: one position later, the last answer token's included), as open-unlearning does. lambda is not saved
    in checkpoints: ``--resume`` restarts it from ``alpha``. lambda moves once per optimiser step, on the retain NLL
    of the step's whole batch (every process, every micro-batch); ``dual_update=epoch`` moves it once per epoch
    instead, as open-unlearning's ``dual_update_upon: epoch``: at the end of each epoch past the warm-up, on the mean
    over the epoch's batches (a fresh pass of the training data loader, model in eval mode, no gradient) of each
    batch's retain NLL (averaged over processes, where open-unlearning's processes each keep their own lambda).
    """

    name = "pdu"
    summary = ("PDU: flatten forget logits ((max - mean logit)^2) subject to retain NLL <= eps, with a dual "
               "variable as the retain weight.")
    paper = "Entesari et al., Constrained Entropic Unlearning: A Primal-Dual Framework for LLMs, 2025 (arXiv:2506.05314)"

    @dataclass
    class Params(MethodParams):
        gamma: float = param(1.0, "weight of the forget (margin) term", ge=0)
        alpha: float = param(100.0, "initial dual variable lambda (the retain weight)", ge=0)
        retain_eps: float = param(0.3, "the bound eps of the constraint retain NLL <= eps", ge=0)
        dual_step_size: float = param(5.0, "step size of the dual ascent on lambda", ge=0)
        dual_warmup_epochs: float = param(5.0, "epochs before lambda starts moving", ge=0)
        all_positions: bool = param(False, "margin over every position, prompt and padding too")
        ou_positions: bool = param(False, "margin over the logits at the answer tokens' own positions (labels not "
                                   "shifted), as open-unlearning's PDU")
        dual_update: str = param("step", "when lambda moves: step = after every optimiser step, on the step's retain "
                                 "NLL; epoch = at the end of every epoch, on the mean retain NLL of a pass over the "
                                 "training batches (open-unlearning's dual_update_upon: epoch)",
                                 choices=("step", "epoch"))

    state_terms = ("dual",)

    def __init__(self, params=None) -> None:
        super().__init__(params)
        self.dual = self.params.alpha  # lambda, updated after every training step
        self._warm = False  # the step being taken started after the warm-up epochs

    def loss(self, ctx, model, inputs):
        p, f = self.params, inputs["forget"]
        if p.all_positions or p.ou_positions:  # every position's logits
            logits = forward(model, f).logits.float()
            squared = (logits.max(-1).values - logits.mean(-1)) ** 2
            margin = (batch_mean(squared.mean(-1), f) if p.all_positions
                      else masked_mean(squared, f["labels"] != -100, f))
        else:
            logits, labels = answer_logits(model, f)
            z = logits[:, :-1].float()
            margin = masked_mean((z.max(-1).values - z.mean(-1)) ** 2, answer_mask(labels), f)
        r = inputs["retain"]
        retain = _nll(model, r)
        # retain is this micro-batch's share of the step's mean; the constant takes the same share
        tokens = answer_mask(r["labels"]).sum()
        loss = p.gamma * margin + self.dual * (retain - p.retain_eps * tokens / share(r, "tokens", tokens))
        terms = {"forget_margin": _logged(margin), "retain_nll": _logged(retain), "dual": self.dual}
        self._warm = (ctx.trainer.state.epoch or 0.0) >= p.dual_warmup_epochs
        if NORM_KEY not in r:  # called outside the trainer's steps: one call, one step
            self.after_step(ctx, terms)
        return loss, terms

    def after_step(self, ctx, terms):
        if self._warm and self.params.dual_update == "step":
            self._move_dual(terms["retain_nll"])

    def _move_dual(self, retain_nll: float) -> None:
        self.dual = max(0.0, self.dual + self.params.dual_step_size * (retain_nll - self.params.retain_eps))

    @torch.no_grad()
    def on_epoch_end(self, ctx):
        p, trainer = self.params, ctx.trainer
        if p.dual_update != "epoch" or (trainer.state.epoch or 0.0) < p.dual_warmup_epochs:
            return
        model, was_training = trainer.model, trainer.model.training
        model.eval()
        total, batches = torch.zeros((), dtype=torch.float64, device=trainer.args.device), 0
        for batch in trainer.get_train_dataloader():
            total += _nll(model, batch["retain"]).double()
            batches += 1
        mean = total / max(batches, 1)
        if trainer.accelerator.num_processes > 1:
            mean = trainer.accelerator.reduce(mean, reduction="mean")
        model.train(was_training)
        self._move_dual(float(mean))


@register
class AltPO(UnlearnMethod):
    """Alternate Preference Optimization: DPO with a plausible alternate answer to the forget question as the
    preferred response and the forget answer as the rejected one, ``-2/beta * logsigmoid(beta * (log-ratio(alternate)
    - log-ratio(forget)))`` with log-ratios to the original model, plus ``alpha`` * retain NLL.

    The alternates come from the model being unlearned (before unlearning), prompted with the question and its
    answer to write a different, plausible answer (the paper's procedure; ``num_alternates`` sampled per question,
    each one training example), or from ``alternates_file`` (JSONL rows with ``question`` and ``alternate``, or
    ``sub_answer`` as in the authors' and open-unlearning's files). The alternates used are written to
    ``OUT/altpo_alternates.jsonl``. Under a launcher the main process generates them and writes the file; the
    other processes receive them from it.
    """

    name = "altpo"
    forget_corpus = "pair"
    vision = False
    qa_only = True
    summary = ("AltPO: DPO preferring a plausible alternate answer (generated by the model itself, or from a file) "
               "over the forget answer, plus retain NLL.")
    paper = "Mekala et al., Alternate Preference Optimization for Unlearning Factual Knowledge in LLMs, COLING 2025"
    reference_nll = ("forget_alternate", "forget")

    @dataclass
    class Params(Preference):
        alternates_file: str | None = param(None, "JSONL of alternate answers (question + alternate); default: generate")
        num_alternates: int = param(1, "alternates generated per forget question (one training example each)", ge=1)
        max_new_tokens: int = param(64, "length limit of a generated alternate, in tokens", ge=1)
        temperature: float = param(1.0, "sampling temperature of the generation", gt=0)
        top_p: float = param(1.0, "nucleus sampling threshold of the generation", gt=0, le=1)

    def prepare(self, run) -> None:
        from unlearn_methods.alternates import ALTERNATES_FILE, generate_alternates, read_alternates, write_alternates
        from unlearn_methods.processes import MainProcessError, main_process, on_main_process

        p = self.params
        if p.alternates_file:
            run.alternates = read_alternates(p.alternates_file, run.forget)
        else:  # under a launcher: generated once, on the main process, and given to the others
            try:
                run.alternates = on_main_process(lambda: generate_alternates(
                    run.model, run.tokenizer, run.forget, n=p.num_alternates, max_new_tokens=p.max_new_tokens,
                    temperature=p.temperature, top_p=p.top_p, seed=run.cfg.seed, progress=run.cfg.progress),
                    errors=(Exception,))
            except MainProcessError as e:  # the main process's error, on every process
                raise ValueError(str(e)) from None
        if main_process().is_main_process:
            write_alternates(run.out / ALTERNATES_FILE, run.forget, run.alternates)

    def loss(self, ctx, model, inputs):
        p = self.params
        win, alternate_nll = _log_ratio(ctx, model, inputs["forget_alternate"])
        lose, forget_nll = _log_ratio(ctx, model, inputs["forget"])
        altpo = batch_mean(-2.0 / p.beta * F.logsigmoid(p.beta * (win - lose)), inputs["forget"])
        retain = _nll(model, inputs["retain"])
        return p.gamma * altpo + p.alpha * retain, {
            "altpo": _logged(altpo), "alternate_seq_nll": _logged(batch_mean(alternate_nll, inputs["forget_alternate"])),
            "forget_seq_nll": _logged(batch_mean(forget_nll, inputs["forget"])),
            "retain_nll": _logged(retain)}
