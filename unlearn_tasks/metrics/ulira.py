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

positive when ``f`` looks unlearned rather than retrained. Margins are clipped to ``[-100, 100]`` first, as KLoM's
easydub binning does (an infinite margin, which vLLM gives above about 16, is a confidence beyond float precision,
not a missing value); ``min_std`` must be positive (a constant shadow population would otherwise divide by zero). ``variance="global"`` uses one standard deviation per
population instead (the median over examples of the per-example ones: LiRA's fixed-variance variant, for few
shadow models).

The attack is evaluated on targets whose kind is known. By default every model of both ensembles is in turn a
target, in k folds (``k = min(n_unlearned, n_oracle)``: with equal counts, leave-one-pair-out), and the shadows
are the models of the other folds of *both* ensembles (a target is never its own shadow, and both shadow
populations lose the same number of models, so small ensembles are not biased towards either hypothesis); with
explicit targets, all ensemble models are shadows. Over every (target, example) pair:

* ``auroc``: ROC AUC of the score, unlearned targets = label 1, oracle targets = label 0;
* ``accuracy``: balanced accuracy ``(tpr + tnr) / 2`` of the likelihood-ratio test at 1 (``score > 0`` means
  "unlearned"), the Bayes decision for equal priors;
* ``tpr`` / ``tnr``: the fractions of unlearned / oracle pairs classified correctly.

0.5 for both is the ideal (unlearned models indistinguishable from retrained ones); 1 means the attack always tells.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from unlearn_tasks.metrics.klom import CLIP, KlomInputError, check_ensembles, check_indices

VARIANCES = ("per-example", "global")
MIN_STD = 1e-3



def _roc_auc_score() -> Any:
    """scikit-learn's ``roc_auc_score``, imported when an AUROC is computed: importing scikit-learn takes seconds,
    and every ``unlearn`` command imports this module to build its ``ulira`` parser."""
    from sklearn.metrics import roc_auc_score

    return roc_auc_score

def _log_normal_pdf(x: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    return -0.5 * ((x - mean) / std) ** 2 - np.log(std) - 0.5 * np.log(2 * np.pi)


def _finish_std(std: np.ndarray, variance: str, min_std: float) -> np.ndarray:
    """Per-example std (last axis = examples) or, for ``global``, its median over examples, floored."""
    if variance == "global":
        std = np.broadcast_to(np.median(std, axis=-1, keepdims=True), std.shape)
    return np.maximum(std, min_std)


def _check_variance(variance: str, min_std: float = MIN_STD) -> None:
    if variance not in VARIANCES:
        raise KlomInputError(f"unknown variance {variance!r}; choose one of {', '.join(VARIANCES)}")
    if not np.isfinite(min_std) or min_std <= 0:
        raise KlomInputError(f"min_std must be a finite number > 0, got {min_std} (a shadow population of equal "
                             "margins has standard deviation 0)")


def fit_gaussians(shadow: np.ndarray, variance: str = "per-example", min_std: float = MIN_STD) -> tuple[np.ndarray, np.ndarray]:
    """Per-example mean and standard deviation ``[n_samples]`` of shadow margins ``[n_models, n_samples]``."""
    _check_variance(variance, min_std)
    shadow = np.clip(np.asarray(shadow, dtype=np.float64), -CLIP, CLIP)
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
    t = np.clip(t, -CLIP, CLIP)
    mu_u, sd_u = fit_gaussians(u, variance, min_std)
    mu_o, sd_o = fit_gaussians(o, variance, min_std)
    scores = _log_normal_pdf(t, mu_u, sd_u) - _log_normal_pdf(t, mu_o, sd_o)
    return scores[0] if squeeze else scores


def cross_validated_scores(
    unlearned: Any, oracle: Any, *, folds: int | None = None, variance: str = "per-example", min_std: float = MIN_STD
) -> tuple[np.ndarray, np.ndarray]:
    """Scores of every model of both ensembles as a target, with shadows that exclude it.

    Model ``i`` of each ensemble is in fold ``i % folds`` (default ``folds = min(n_unlearned, n_oracle)``, so with
    equal counts fold k is the pair (unlearned k, oracle k): leave-one-pair-out). The targets of a fold are scored
    against Gaussians fitted to the models of all other folds, so both shadow populations lose the same number of
    models and neither hypothesis is favoured (leaving out only the target's own model would bias small ensembles).
    """
    _check_variance(variance, min_std)
    u, o = check_ensembles(unlearned, oracle)
    u, o = u.astype(np.float64), o.astype(np.float64)
    k = min(u.shape[0], o.shape[0]) if folds is None else int(folds)
    if k < 2 or k > min(u.shape[0], o.shape[0]):
        raise KlomInputError(f"U-LiRA cross-validation needs 2 <= folds <= the smaller ensemble size; got {k} folds for "
                             f"{u.shape[0]} unlearned and {o.shape[0]} oracle models (at least 2 models each)")
    fold_u, fold_o = np.arange(u.shape[0]) % k, np.arange(o.shape[0]) % k
    scores_u, scores_o = np.empty_like(u), np.empty_like(o)
    for f in range(k):
        su = ulira_scores(u[fold_u == f], u[fold_u != f], o[fold_o != f], variance=variance, min_std=min_std)
        so = ulira_scores(o[fold_o == f], u[fold_u != f], o[fold_o != f], variance=variance, min_std=min_std)
        scores_u[fold_u == f], scores_o[fold_o == f] = su, so
    return scores_u, scores_o


def attack_metrics(scores_unlearned: np.ndarray, scores_oracle: np.ndarray) -> dict[str, float]:
    """AUROC, balanced accuracy at score 0, TPR and TNR over all pairs (unlearned targets = positives)."""
    su, so = np.ravel(scores_unlearned), np.ravel(scores_oracle)
    labels = np.concatenate([np.ones(su.size), np.zeros(so.size)])
    tpr, tnr = float((su > 0).mean()), float((so <= 0).mean())
    return {
        "auroc": float(_roc_auc_score()(labels, np.concatenate([su, so]))),
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
    folds: int | None = None,
    variance: str = "per-example",
    min_std: float = MIN_STD,
) -> tuple[dict[str, Any], np.ndarray]:
    """The U-LiRA attack over the examples ``indices`` (default: all).

    Returns ``(summary, per_example_accuracy)``: the summary holds the metrics of :func:`attack_metrics`, the
    protocol, counts and options; ``per_example_accuracy`` is each example's balanced accuracy over the
    targets (NaN outside ``indices``). Give both ``target_unlearned`` and ``target_oracle`` (margins of held-out
    models of each kind) to score them instead of the cross-validation of :func:`cross_validated_scores`.
    """
    _check_variance(variance, min_std)
    u, o = check_ensembles(unlearned, oracle)
    cols = np.arange(u.shape[1]) if indices is None else np.unique(check_indices(indices, u.shape[1], "forget"))
    if (target_unlearned is None) != (target_oracle is None):
        raise KlomInputError("give both target ensembles (unlearned and oracle targets) or neither (cross-validation)")
    if target_unlearned is None:
        su, so = cross_validated_scores(u[:, cols], o[:, cols], folds=folds, variance=variance, min_std=min_std)
        protocol = f"{folds or min(u.shape[0], o.shape[0])}-fold"
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
