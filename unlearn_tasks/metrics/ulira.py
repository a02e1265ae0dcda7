"""U-LiRA: the per-example likelihood-ratio membership test for unlearning (Hayes et al. 2024, "Inexact
Unlearning Needs More Careful Evaluations to Avoid a False Sense of Privacy"; LiRA of Carlini et al. 2022 adapted
to unlearning), on the same margin ensembles as KLoM.

For a target model ``f`` and an example ``x`` (normally of the forget set) the test decides between

* H1 "unlearned": ``f`` was trained with ``x`` and then ``x`` was unlearned (the *unlearned* ensemble), and
* H0 "retrained": ``f`` never saw ``x`` (the *oracle* ensemble).

The statistic is LiRA's logit-scaled confidence ``log p - log(1 - p)``, which is exactly our margin. Per example,
each population is modelled by a Gaussian fitted to its shadow models' margins (mean; standard deviation with
``ddof=0``, floored at ``min_std``), and the score is the log likelihood ratio

    score(f, x) = log N(m_f(x); mu_U(x), sd_U(x)^2) - log N(m_f(x); mu_O(x), sd_O(x)^2),

positive when ``f`` looks unlearned rather than retrained. ``variance="global"`` uses one standard deviation per
population instead (the median over examples of the per-example ones: LiRA's fixed-variance variant, for few
shadow models).

The attack is evaluated on targets whose kind is known. By default (``leave-one-out``) every model of both
ensembles is in turn the target and the shadows are all the *other* models (a target is never its own shadow);
with explicit targets, all ensemble models are shadows. Over every (target, example) pair:

* ``auroc``: ROC AUC of the score, unlearned targets = label 1, oracle targets = label 0;
* ``accuracy``: balanced accuracy ``(tpr + tnr) / 2`` of the likelihood-ratio test at 1 (``score > 0`` means
  "unlearned"), the Bayes decision for equal priors;
* ``tpr`` / ``tnr``: the fractions of unlearned / oracle pairs classified correctly.

0.5 for both is the ideal (unlearned models indistinguishable from retrained ones); 1 means the attack always tells.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.metrics import roc_auc_score

from unlearn_tasks.metrics.klom import KlomInputError, check_ensembles, check_indices

VARIANCES = ("per-example", "global")
MIN_STD = 1e-3


def _log_normal_pdf(x: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    return -0.5 * ((x - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)


def _finish_std(std: np.ndarray, variance: str, min_std: float) -> np.ndarray:
    """Per-example std (last axis = examples) or, for ``global``, its median over examples, floored."""
    if variance == "global":
        std = np.broadcast_to(np.median(std, axis=-1, keepdims=True), std.shape)
    return np.maximum(std, min_std)


def _check_variance(variance: str) -> None:
    if variance not in VARIANCES:
        raise KlomInputError(f"unknown variance {variance!r}; choose one of {', '.join(VARIANCES)}")


def fit_gaussians(shadow: np.ndarray, variance: str = "per-example", min_std: float = MIN_STD) -> tuple[np.ndarray, np.ndarray]:
    """Per-example mean and standard deviation ``[n_samples]`` of shadow margins ``[n_models, n_samples]``."""
    _check_variance(variance)
    shadow = np.asarray(shadow, dtype=np.float64)
    return shadow.mean(axis=0), _finish_std(shadow.std(axis=0), variance, min_std)


def ulira_scores(
    target: Any, unlearned: Any, oracle: Any, *, variance: str = "per-example", min_std: float = MIN_STD
) -> np.ndarray:
    """Log likelihood ratios ``[n_targets, n_samples]`` (``[n_samples]`` for a 1-D target) of target margins
    under the unlearned vs the oracle shadow Gaussians."""
    u, o = check_ensembles(unlearned, oracle)
    t = np.asarray(target, dtype=np.float64)
    squeeze = t.ndim == 1
    t = np.atleast_2d(t)
    if t.shape[1] != u.shape[1]:
        raise KlomInputError(f"the target has {t.shape[1]} samples per model but the ensembles have {u.shape[1]}")
    if np.isnan(t).any():
        raise KlomInputError(f"target margins contain {int(np.isnan(t).sum())} NaN values")
    mu_u, sd_u = fit_gaussians(u, variance, min_std)
    mu_o, sd_o = fit_gaussians(o, variance, min_std)
    scores = _log_normal_pdf(t, mu_u, sd_u) - _log_normal_pdf(t, mu_o, sd_o)
    return scores[0] if squeeze else scores


def leave_one_out_scores(
    unlearned: Any, oracle: Any, *, variance: str = "per-example", min_std: float = MIN_STD
) -> tuple[np.ndarray, np.ndarray]:
    """Scores of every model of each ensemble as a target, its own row left out of the shadows (closed form:
    leave-one-out mean ``m - d_i / (N - 1)`` and sum of squares ``SS - d_i^2 N / (N - 1)``)."""
    _check_variance(variance)
    u, o = check_ensembles(unlearned, oracle)
    u, o = u.astype(np.float64), o.astype(np.float64)
    for name, ens in (("unlearned", u), ("oracle", o)):
        if ens.shape[0] < 2:
            raise KlomInputError(f"leave-one-out U-LiRA needs at least 2 {name} models (one target, one shadow); "
                                 f"got {ens.shape[0]}")

    def loo(ens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = ens.shape[0]
        mean = ens.mean(axis=0)
        dev = ens - mean
        ss = (dev**2).sum(axis=0)
        loo_mean = mean - dev / (n - 1)
        loo_std = np.sqrt(np.maximum(ss - dev**2 * n / (n - 1), 0.0) / (n - 1))
        return loo_mean, _finish_std(loo_std, variance, min_std)

    mu_u_all, sd_u_all = fit_gaussians(u, variance, min_std)
    mu_o_all, sd_o_all = fit_gaussians(o, variance, min_std)
    mu_u_loo, sd_u_loo = loo(u)
    mu_o_loo, sd_o_loo = loo(o)
    scores_u = _log_normal_pdf(u, mu_u_loo, sd_u_loo) - _log_normal_pdf(u, mu_o_all, sd_o_all)
    scores_o = _log_normal_pdf(o, mu_u_all, sd_u_all) - _log_normal_pdf(o, mu_o_loo, sd_o_loo)
    return scores_u, scores_o


def attack_metrics(scores_unlearned: np.ndarray, scores_oracle: np.ndarray) -> dict[str, float]:
    """AUROC, balanced accuracy at score 0, TPR and TNR over all pairs (unlearned targets = positives)."""
    su, so = np.ravel(scores_unlearned), np.ravel(scores_oracle)
    labels = np.concatenate([np.ones(su.size), np.zeros(so.size)])
    tpr, tnr = float((su > 0).mean()), float((so <= 0).mean())
    return {
        "auroc": float(roc_auc_score(labels, np.concatenate([su, so]))),
        "accuracy": (tpr + tnr) / 2,
        "tpr": tpr,
        "tnr": tnr,
    }


def ulira(
    unlearned: Any,
    oracle: Any,
    indices: Any = None,
    *,
    target_unlearned: Any = None,
    target_oracle: Any = None,
    variance: str = "per-example",
    min_std: float = MIN_STD,
) -> tuple[dict[str, Any], np.ndarray]:
    """The U-LiRA attack over the examples ``indices`` (default: all).

    Returns ``(summary, per_example_accuracy)``: the summary holds the metrics of :func:`attack_metrics`, the
    protocol, counts and options; ``per_example_accuracy`` is each example's balanced accuracy over the
    targets (NaN outside ``indices``). Give both ``target_unlearned`` and ``target_oracle`` (margins of held-out
    models of each kind) to score them instead of leave-one-out.
    """
    _check_variance(variance)
    u, o = check_ensembles(unlearned, oracle)
    cols = np.arange(u.shape[1]) if indices is None else np.unique(check_indices(indices, u.shape[1], "forget"))
    if (target_unlearned is None) != (target_oracle is None):
        raise KlomInputError("give both target ensembles (unlearned and oracle targets) or neither (leave-one-out)")
    if target_unlearned is None:
        su, so = leave_one_out_scores(u[:, cols], o[:, cols], variance=variance, min_std=min_std)
        protocol = "leave-one-out"
        n_tu, n_to = u.shape[0], o.shape[0]
    else:
        tu, to = check_ensembles(target_unlearned, target_oracle)
        if tu.shape[1] != u.shape[1]:
            raise KlomInputError(f"the targets have {tu.shape[1]} samples per model but the shadow ensembles have "
                                 f"{u.shape[1]}")
        su = ulira_scores(tu[:, cols], u[:, cols], o[:, cols], variance=variance, min_std=min_std)
        so = ulira_scores(to[:, cols], u[:, cols], o[:, cols], variance=variance, min_std=min_std)
        protocol = "targets"
        n_tu, n_to = tu.shape[0], to.shape[0]
    summary: dict[str, Any] = {
        **attack_metrics(su, so),
        "n_samples": int(cols.size),
        "n_unlearned_targets": int(n_tu),
        "n_oracle_targets": int(n_to),
        "protocol": protocol,
        "variance": variance,
        "min_std": min_std,
    }
    per_example = np.full(u.shape[1], np.nan)
    per_example[cols] = ((su > 0).mean(axis=0) + (so <= 0).mean(axis=0)) / 2
    return summary, per_example
