"""The unlearning methods. Each is a loss over a batch ``{"forget", "retain", "forget_idk", "forget_alt"}``
(see :mod:`unlearn_methods.data`) and one ``@register`` line. Weights: ``gamma`` on the forget term,
``alpha`` on the retain term, unless a method says otherwise.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from unlearn_methods.base import MethodContext, UnlearnMethod
from unlearn_methods.losses import forward, kl_to_reference, mean_nll, sequence_nll
from unlearn_methods.registry import register


def _v(t: torch.Tensor) -> float:
    """A loss term as a plain number for logging."""
    return float(t.detach())


def _nll(model, batch) -> torch.Tensor:
    return mean_nll(forward(model, batch).logits, batch["labels"])


@register
class GradientAscent(UnlearnMethod):
    name = "ga"
    summary = "Gradient Ascent: maximise the NLL of the forget answers."

    def loss(self, ctx, model, inputs):
        forget = _nll(model, inputs["forget"])
        return -forget, {"forget_nll": _v(forget)}


@register
class GradientDifference(UnlearnMethod):
    name = "graddiff"
    summary = "Gradient Difference: ascent on forget, descent on retain."
    defaults = {"gamma": 1.0, "alpha": 1.0}

    def loss(self, ctx, model, inputs):
        forget, retain = _nll(model, inputs["forget"]), _nll(model, inputs["retain"])
        return -self.gamma * forget + self.alpha * retain, {"forget_nll": _v(forget), "retain_nll": _v(retain)}


@register
class KLMinimisation(UnlearnMethod):
    name = "kl"
    summary = "KL minimisation: ascent on forget, KL(original || model) on retain."
    needs_reference = True
    defaults = {"gamma": 1.0, "alpha": 1.0}

    def loss(self, ctx, model, inputs):
        forget = _nll(model, inputs["forget"])
        r = inputs["retain"]
        kl = kl_to_reference(forward(model, r).logits, ctx.reference_outputs(r).logits, r["labels"])
        return -self.gamma * forget + self.alpha * kl, {"forget_nll": _v(forget), "retain_kl": _v(kl)}


@register
class IDKFinetune(UnlearnMethod):
    name = "idk"
    summary = "IDK fine-tuning: learn refusals on forget questions, keep retain answers."
    defaults = {"gamma": 1.0, "alpha": 1.0}

    def loss(self, ctx, model, inputs):
        idk, retain = _nll(model, inputs["forget_idk"]), _nll(model, inputs["retain"])
        return self.gamma * idk + self.alpha * retain, {"idk_nll": _v(idk), "retain_nll": _v(retain)}


def _log_ratio(ctx: MethodContext, model, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(log pi(y|x) - log pi_ref(y|x) per sequence, model's summed NLL per sequence)."""
    nll, _ = sequence_nll(forward(model, batch).logits, batch["labels"])
    ref_nll, _ = sequence_nll(ctx.reference_outputs(batch).logits, batch["labels"])
    return ref_nll - nll, nll


@register
class DPO(UnlearnMethod):
    name = "dpo"
    summary = "DPO preferring a refusal (win) over the forget answer (lose), plus retain NLL."
    needs_reference = True
    defaults = {"beta": 0.1, "gamma": 1.0, "alpha": 1.0}

    def loss(self, ctx, model, inputs):
        win, _ = _log_ratio(ctx, model, inputs["forget_idk"])
        lose, _ = _log_ratio(ctx, model, inputs["forget"])
        dpo = (-2.0 / self.beta * F.logsigmoid(self.beta * (win - lose))).mean()
        retain = _nll(model, inputs["retain"])
        return self.gamma * dpo + self.alpha * retain, {"dpo": _v(dpo), "retain_nll": _v(retain)}


@register
class NPO(UnlearnMethod):
    name = "npo"
    summary = "Negative Preference Optimisation: -2/beta * logsigmoid(beta * (NLL - NLL_ref)) on forget, plus retain NLL."
    needs_reference = True
    defaults = {"beta": 0.1, "gamma": 1.0, "alpha": 1.0}

    def loss(self, ctx, model, inputs):
        log_ratio, nll = _log_ratio(ctx, model, inputs["forget"])
        npo = (-2.0 / self.beta * F.logsigmoid(-self.beta * log_ratio)).mean()
        retain = _nll(model, inputs["retain"])
        return self.gamma * npo + self.alpha * retain, {"npo": _v(npo), "forget_seq_nll": _v(nll.mean()), "retain_nll": _v(retain)}


@register
class SimNPO(UnlearnMethod):
    name = "simnpo"
    summary = "SimNPO: reference-free NPO on the length-normalised NLL, -2/beta * logsigmoid(beta * (avgNLL - delta))."
    defaults = {"beta": 4.5, "delta": 0.0, "gamma": 0.125, "alpha": 1.0}

    def loss(self, ctx, model, inputs):
        f = inputs["forget"]
        nll, n = sequence_nll(forward(model, f).logits, f["labels"])
        simnpo = (-2.0 / self.beta * F.logsigmoid(self.beta * (nll / n - self.delta))).mean()
        retain = _nll(model, inputs["retain"])
        return self.gamma * simnpo + self.alpha * retain, {"simnpo": _v(simnpo), "retain_nll": _v(retain)}


@register
class SCRUB(UnlearnMethod):
    name = "scrub"
    summary = ("SCRUB: the original model is a teacher; 'max' steps push the student away from it on forget, "
               "'min' steps keep it close (KL) and accurate (NLL) on retain.")
    needs_reference = True
    defaults = {"max_every": 2, "max_fraction": 0.5, "gamma": 1.0, "alpha": 1.0}

    def is_max_step(self, ctx: MethodContext) -> bool:
        total = max(1, ctx.trainer.state.max_steps or 1)
        return ctx.step < self.max_fraction * total and ctx.step % self.max_every == 0

    def loss(self, ctx, model, inputs):
        if self.is_max_step(ctx):
            f = inputs["forget"]
            kl = kl_to_reference(forward(model, f).logits, ctx.reference_outputs(f).logits, f["labels"])
            return -self.gamma * kl, {"forget_kl": _v(kl)}
        r = inputs["retain"]
        logits = forward(model, r).logits
        kl = kl_to_reference(logits, ctx.reference_outputs(r).logits, r["labels"])
        nll = mean_nll(logits, r["labels"])
        return kl + self.alpha * nll, {"retain_kl": _v(kl), "retain_nll": _v(nll)}


@register
class LLMU(UnlearnMethod):
    name = "llmu"
    summary = ("LLMU (Yao et al.): ascent on forget, descent on forget questions paired with random answers, "
               "KL(original || model) on retain.")
    needs_reference = True
    defaults = {"eps_forget": 1.0, "eps_random": 1.0, "eps_retain": 1.0}

    def loss(self, ctx, model, inputs):
        forget, mismatch = _nll(model, inputs["forget"]), _nll(model, inputs["forget_alt"])
        r = inputs["retain"]
        kl = kl_to_reference(forward(model, r).logits, ctx.reference_outputs(r).logits, r["labels"])
        total = -self.eps_forget * forget + self.eps_random * mismatch + self.eps_retain * kl
        return total, {"forget_nll": _v(forget), "random_nll": _v(mismatch), "retain_kl": _v(kl)}


@register
class RMU(UnlearnMethod):
    name = "rmu"
    summary = ("RMU: steer the chosen layer's activations on forget text toward a fixed random vector; keep them "
               "equal to the original model's on retain text.")
    needs_reference = True
    defaults = {"layer": -1, "steering_coeff": 2.0, "alpha": 1.0, "seed": 0}

    def _hidden(self, out, n_layers: int) -> torch.Tensor:
        layer = self.layer if self.layer >= 0 else n_layers // 2
        return out.hidden_states[layer + 1]  # hidden_states[0] is the embedding output

    def loss(self, ctx, model, inputs):
        f, r = inputs["forget"], inputs["retain"]
        out_f = forward(model, f, output_hidden_states=True)
        n_layers = len(out_f.hidden_states) - 1
        h_f = self._hidden(out_f, n_layers)
        if "_u" not in self.__dict__:
            g = torch.Generator().manual_seed(int(self.seed))
            u = torch.rand(h_f.shape[-1], generator=g)
            self.__dict__["_u"] = u / u.norm()
        target = (self.steering_coeff * self.__dict__["_u"]).to(h_f.device, h_f.dtype)
        mask_f = f["attention_mask"].unsqueeze(-1).to(h_f.dtype)
        forget = (((h_f - target) ** 2) * mask_f).sum() / (mask_f.sum() * h_f.shape[-1])
        h_r = self._hidden(forward(model, r, output_hidden_states=True), n_layers)
        h_ref = self._hidden(ctx.reference_outputs(r, output_hidden_states=True), n_layers)
        mask_r = r["attention_mask"].unsqueeze(-1).to(h_r.dtype)
        retain = (((h_r - h_ref) ** 2) * mask_r).sum() / (mask_r.sum() * h_r.shape[-1])
        return forget + self.alpha * retain, {"forget_mse": _v(forget), "retain_mse": _v(retain)}


@register
class RetainFinetune(UnlearnMethod):
    name = "retain_ft"
    summary = "Retain fine-tuning: keep training on the retain set only (a baseline)."

    def loss(self, ctx, model, inputs):
        retain = _nll(model, inputs["retain"])
        return retain, {"retain_nll": _v(retain)}


@register
class TaskVector(UnlearnMethod):
    name = "task_vector"
    summary = ("Task Vector negation: fine-tune a copy on the forget set, then subtract alpha times the weight "
               "change from the original model.")
    defaults = {"alpha": 1.0, "reinforce_epochs": 5.0, "reinforce_lr": None}

    @property
    def trains(self) -> bool:
        return False

    def prepare(self, run) -> None:
        self.__dict__["_reinforced"] = run.reinforced_model(self.reinforce_epochs, self.reinforce_lr)

    def finalize(self, run, model):
        reinforced = self.__dict__.pop("_reinforced").state_dict()
        with torch.no_grad():
            for name, param in run.base_model_for_arithmetic().state_dict().items():
                if name in reinforced and param.dtype.is_floating_point:
                    param.sub_(self.alpha * (reinforced[name].to(param.device) - param))
        return run.base_model_for_arithmetic()


@register
class WhosHarryPotter(UnlearnMethod):
    name = "whp"
    summary = ("Who's Harry Potter: fine-tune a reinforced copy on the forget set; train the model toward the "
               "generic prediction softmax(v_base - alpha * relu(v_reinforced - v_base)) on forget text. "
               "The logit combination is distilled into the weights, so the result is an ordinary checkpoint.")
    needs_reference = True
    defaults = {"alpha": 1.0, "reinforce_epochs": 5.0, "reinforce_lr": None, "retain_weight": 0.0}

    def prepare(self, run) -> None:
        reinforced = run.reinforced_model(self.reinforce_epochs, self.reinforce_lr).eval()
        for p in reinforced.parameters():
            p.requires_grad_(False)
        self.__dict__["_reinforced"] = reinforced

    def loss(self, ctx, model, inputs):
        f = inputs["forget"]
        base = ctx.reference_outputs(f).logits.float()
        reinforced_model = self.__dict__["_reinforced"].to(base.device)
        with torch.no_grad():
            reinforced = forward(reinforced_model, f).logits.float()
        generic = F.softmax(base - self.alpha * F.relu(reinforced - base), -1)[:, :-1]
        logp = F.log_softmax(forward(model, f).logits[:, :-1].float(), -1)
        mask = (f["labels"][:, 1:] != -100).float()
        distill = -((generic * logp).sum(-1) * mask).sum() / mask.sum().clamp_min(1)
        terms = {"generic_ce": _v(distill)}
        if self.retain_weight:
            retain = _nll(model, inputs["retain"])
            terms["retain_nll"] = _v(retain)
            distill = distill + self.retain_weight * retain
        return distill, terms
