"""Per-fold nuisance models: spec dp_ate_ensemble.md §2.2 step 2 and §2.7 (fallbacks).

Model k sees only fold k's rows (and, for the outcome models, only one arm of them): any estimator
with ``fit``/``predict`` (``predict_proba`` for the propensity, or for a classifier used as outcome
model on binary outcomes) is cloned per fold, so preprocessing inside a user's ``Pipeline`` is
fitted inside the fold. Degenerate folds, and folds whose fit raises (a failure that may depend
on the data), fall back to fold-local constants (§2.7), which keeps the privacy analysis intact
since they use fold k's data only; the error's details go only to the curator's private log.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
from scipy import linalg
from sklearn.base import is_classifier
from sklearn.linear_model import LinearRegression, LogisticRegression

from dpcausal.ate.batched_fit import batchable, fit_many, group_bounds
from dpcausal.validation import guarded, private_log

# A fitted nuisance is either a fitted estimator or a float constant (a §2.7 fallback).
Nuisance = Any

#: The public propensity of a fold with no training row (every row of it lacks a usable
#: treatment or outcome, or a partition's hash gave it none): spec §2.7 fallbacks.
_EMPTY_FOLD_PROPENSITY = 0.5


@dataclass(frozen=True)
class FoldModels:
    """The fitted nuisances of one fold k (non-private: never released or persisted publicly).

    ``propensity`` predicts P(A=1|x); ``mu1``/``mu0`` predict E[Y|x, A=a] on the outcome's own
    scale. Any of them is ``None`` when the estimator does not use it.
    """

    k: int
    propensity: Nuisance | None
    mu1: Nuisance | None
    mu0: Nuisance | None
    failed: int = 0   # nuisances whose fit raised and fell back (non-private: evaluation only)

    def renumbered(self, k: int) -> FoldModels:
        """The same models as fold ``k`` (``dataclasses.replace`` costs 15 us, at thousands of
        folds per partition)."""
        return FoldModels(k, self.propensity, self.mu1, self.mu0, self.failed)


def fit_fold(
    X: np.ndarray,
    A: np.ndarray,
    Y: np.ndarray,
    rows: np.ndarray,
    k: int,
    *,
    estimator: str,
    propensity_model: Any,
    outcome_model: Any,
    propensity_clip: float,
) -> FoldModels:
    """Fit fold k's nuisances on ``rows`` only: spec §2.2 step 2, T-learner outcomes, §2.7
    fallbacks.

    The models are unfitted prototypes (``sklearn.base.clone`` of the user's): each fit works on
    a deep copy, which is what a clone gives at a sixth of the cost.
    """
    Xk, Ak, Yk = take_rows(X, rows), A[rows], Y[rows]
    failed = 0
    propensity = None
    if estimator in ("ipw", "aipw"):
        pi_const = (float(np.clip(Ak.mean(), propensity_clip, 1.0 - propensity_clip))
                    if Ak.size else _EMPTY_FOLD_PROPENSITY)
        propensity, bad = _or_fallback(
            partial(_fit_propensity, propensity_model, Xk, Ak, pi_const), pi_const, k,
            "propensity")
        failed += bad
    mu1 = mu0 = None
    if estimator in ("g", "aipw"):
        arms = []
        for arm in (1, 0):
            Xa, Ya = take_rows(Xk, Ak == arm), Yk[Ak == arm]
            mean = float(Ya.mean()) if Ya.size else None
            fitted, bad = _or_fallback(partial(_fit_outcome, outcome_model, Xa, Ya), mean, k,
                                       f"mu{arm}")
            arms.append(fitted)
            failed += bad
        mu1, mu0 = arms
    return FoldModels(k=k, propensity=propensity, mu1=mu1, mu0=mu0, failed=failed)


def fit_folds(
    X: Any,
    A: np.ndarray,
    Y: np.ndarray,
    fold_ids: np.ndarray,
    ks: Sequence[int],
    *,
    estimator: str,
    propensity_model: Any,
    outcome_model: Any,
    propensity_clip: float,
) -> list[FoldModels]:
    """Fold models of the folds ``ks`` (in that order), each fitted on its own rows only: spec
    §2.2 step 2 and §2.7 fallbacks, as :func:`fit_fold` per fold.

    Rows need only cover the folds ``ks`` (a partition of the data may hold a subset of folds).
    Plain ``LinearRegression`` / L2 ``LogisticRegression`` models on a float array are fitted
    in batches (:mod:`dpcausal.ate.batched_fit`); other models fold by fold.
    """
    ks = [int(k) for k in ks]
    n_groups = max([int(fold_ids.max()) if fold_ids.size else 0, *ks]) + 1
    order, starts, sizes = group_bounds(fold_ids, n_groups)
    used = ([propensity_model] if estimator in ("ipw", "aipw") else []) + (
        [outcome_model] if estimator in ("g", "aipw") else [])
    if not (isinstance(X, np.ndarray) and all(batchable(m) for m in used)):
        return [fit_fold(X, A, Y, order[starts[k]:starts[k] + sizes[k]], k, estimator=estimator,
                         propensity_model=propensity_model, outcome_model=outcome_model,
                         propensity_clip=propensity_clip) for k in ks]
    kk = np.asarray(ks, dtype=np.int64)
    fitted: dict[str, list[Nuisance]] = {}
    failed = np.zeros(len(ks), dtype=np.int64)  # fits with no finite solution (batched_fit)
    if estimator in ("ipw", "aipw"):
        Xs, As = X[order], A[order].astype(float)
        treated = _group_sums(As, starts[kk], sizes[kk])
        share = np.where(sizes[kk] > 0, np.clip(treated / np.maximum(sizes[kk], 1),
                                                propensity_clip, 1 - propensity_clip),
                         _EMPTY_FOLD_PROPENSITY)
        mixed = (treated > 0) & (treated < sizes[kk])
        models = fit_many(propensity_model, Xs, As, starts[kk[mixed]], sizes[kk[mixed]])
        it = iter(models)
        propensity = [next(it) if ok else float(c) for ok, c in zip(mixed, share, strict=True)]
        failed += [m is None for m in propensity]       # no finite solution: the constant
        fitted["propensity"] = [float(c) if m is None else m
                                for m, c in zip(propensity, share, strict=True)]
    if estimator in ("g", "aipw"):
        keys = 2 * fold_ids + A.astype(np.int64)
        order2, starts2, sizes2 = group_bounds(keys, 2 * n_groups)
        Xs, Ys = X[order2], Y[order2].astype(float)
        for arm in (1, 0):
            g = 2 * kk + arm
            fitted[f"mu{arm}"], arm_failed = _fit_arms(outcome_model, Xs, Ys, starts2[g],
                                                       sizes2[g])
            failed += arm_failed
    if failed.any():
        private_log.error("%d batched fold fits had no finite solution (fold %s); using their "
                          "fold-local constants", int(failed.sum()),
                          ", ".join(str(k) for k, f in zip(ks, failed, strict=True) if f))
    none: list[Nuisance] = [None] * len(ks)     # once: a default per fold was O(K^2)
    return [FoldModels(k=k, propensity=p, mu1=m1, mu0=m0, failed=int(f))
            for k, p, m1, m0, f in zip(ks, fitted.get("propensity", none),
                                       fitted.get("mu1", none), fitted.get("mu0", none),
                                       failed, strict=True)]


def _fit_arms(model: Any, Xs: np.ndarray, Ys: np.ndarray, starts: np.ndarray, sizes: np.ndarray
              ) -> tuple[list[Nuisance], np.ndarray]:
    """Batched :func:`_fit_outcome` over fold-arms (rows ``Xs[s:s+size]``): the §2.7 fallbacks
    (empty arm ``None``; one unit, or one class for a classifier, or a fit with no finite
    solution: the arm's mean), and which fold-arms' fits had none (1, else 0)."""
    fit = sizes >= 2
    sums = _group_sums(Ys, starts, sizes)       # exact for 0/1 outcomes
    if is_classifier(model):
        # a classifier needs 0/1 outcomes: a fold-arm holding another value takes its mean,
        # as the unbatched fit's fallback does (§2.7): a release never fails after its charge
        other = _group_sums((~np.isin(Ys, (0.0, 1.0))).astype(float), starts, sizes) > 0
        if other.any():
            private_log.error("a classifier outcome model met outcomes other than 0/1 in %d "
                              "fold-arms; using their means", int(other.sum()))
        fit &= (sums > 0) & (sums < sizes) & ~other
    it = iter(fit_many(model, Xs, Ys, starts[fit], sizes[fit]))
    out: list[Nuisance] = []
    unsolved = np.zeros(len(starts), dtype=np.int64)
    for j, (f, start, size, total) in enumerate(zip(fit, starts, sizes, sums, strict=True)):
        fitted = next(it) if f else None
        unsolved[j] = f and fitted is None
        if fitted is not None:
            out.append(fitted)
        elif size == 1:
            out.append(float(Ys[start]))
        else:     # a one-class or non-0/1 classifier arm, or no finite solution: its mean
            out.append(float(total / size) if size else None)
    return out, unsolved


def _group_sums(values: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Sums of ``values[s:s + size]`` per group (from a cumulative sum; exact for counts)."""
    cum = np.concatenate([[0.0], np.cumsum(values)])
    return cum[starts + sizes] - cum[starts]


def take_rows(X: Any, rows: Any) -> Any:
    """Rows of X by position (an index array, boolean mask or slice), for arrays and DataFrames
    alike (covariates keep their column names and dtypes, which a user's Pipeline may select by)."""
    return X.iloc[rows] if isinstance(X, pd.DataFrame) else X[rows]


def _or_fallback(fit: Callable[[], Nuisance], constant: float | None, k: int, name: str
                 ) -> tuple[Nuisance, int]:
    """``fit()``, or the fold-local §2.7 constant if it raises: a user
    model's failure may depend on the fold's data, so it must not end the release or reach its
    output; the error goes to the private log."""
    try:
        return fit(), 0
    except BaseException as exc:  # noqa: BLE001 - SystemExit too: never fail after the charge
        if not guarded(exc):
            raise
        private_log.error("fold %d: fitting %s raised; using the fold-local constant", k, name,
                          exc_info=exc)
        return constant, 1


def _fit_propensity(model: Any, Xk: np.ndarray, Ak: np.ndarray, constant: float) -> Nuisance:
    """§2.7: if A is constant in the fold, ``constant`` = clip(mean A_k, eta_c, 1 - eta_c)
    (1/2 for an empty fold)."""
    if Ak.size == 0 or Ak.min() == Ak.max():
        return constant
    return copy.deepcopy(model).fit(Xk, Ak)


def _fit_outcome(model: Any, Xa: np.ndarray, Ya: np.ndarray) -> Nuisance:
    """§2.7: with < 2 units of the arm, mu_hat_a^(k) := mean of Y in that arm (None if empty).

    A classifier (binary outcomes) whose fold-arm holds a single class also falls back to the mean.
    An empty arm returns ``None``, replaced by the centre of the outcome bounds at prediction time.
    """
    if Ya.size == 0:
        return None
    if Ya.size < 2 or (is_classifier(model) and Ya.min() == Ya.max()):
        return float(Ya.mean())
    if is_classifier(model) and not np.isin(Ya, (0.0, 1.0)).all():
        raise ValueError(
            f"outcome_model {type(model).__name__} is a classifier, so Y must be binary 0/1; "
            "use a regressor for real-valued outcomes"
        )
    if type(model) is LinearRegression and not model.positive and isinstance(Xa, np.ndarray):
        return _fit_least_squares(model, Xa, Ya)
    return copy.deepcopy(model).fit(Xa, Ya.astype(int) if is_classifier(model) else Ya)


def _fit_least_squares(model: LinearRegression, X: np.ndarray, y: np.ndarray) -> LinearRegression:
    """``LinearRegression.fit`` on validated dense data, as sklearn computes it (``lstsq`` on
    centred data, intercept = y_offset - x_offset . coef) without its per-call input checks,
    which dominate a K=200 fit of small folds."""
    fitted = copy.deepcopy(model)
    x_offset = X.mean(axis=0) if model.fit_intercept else np.zeros(X.shape[1])
    y_offset = y.mean() if model.fit_intercept else 0.0
    coef, _, fitted.rank_, fitted.singular_ = linalg.lstsq(X - x_offset, y - y_offset,
                                                           cond=model.tol)
    fitted.coef_ = coef
    fitted.intercept_ = y_offset - x_offset @ coef if model.fit_intercept else 0.0
    fitted.n_features_in_ = X.shape[1]
    return fitted


def predict_nuisance(model: Nuisance, X: np.ndarray, default: float) -> np.ndarray:
    """Raw (unclipped) predictions of one fitted nuisance on X: P(A=1|x) or E[Y|x, a].

    Classifiers predict through ``predict_proba``'s column for class 1; a constant fallback
    predicts itself; ``None`` (an empty arm) predicts ``default``.
    """
    if model is None:
        return np.full(X.shape[0], default)
    if isinstance(model, float):
        return np.full(X.shape[0], model)
    if is_classifier(model) or not hasattr(model, "predict"):
        proba = model.predict_proba(X)
        col = int(np.flatnonzero(np.asarray(model.classes_) == 1)[0])
        return np.asarray(proba[:, col], dtype=float)
    return np.asarray(model.predict(X), dtype=float).ravel()


def linear_form(model: Nuisance) -> tuple[str, np.ndarray, float] | None:
    """``("linear"|"logistic", coef, intercept)`` when predictions are a (link of a) linear form.

    Lets aggregation predict all K fold models with one matrix product, fast at large K;
    only exact ``LinearRegression``/binary ``LogisticRegression`` instances qualify.
    """
    if type(model) is LinearRegression and np.ndim(model.coef_) == 1:
        return "linear", np.asarray(model.coef_, dtype=float), float(model.intercept_)
    if (type(model) is LogisticRegression and len(model.classes_) == 2
            and list(model.classes_) == [0, 1]):
        return "logistic", np.asarray(model.coef_[0], dtype=float), float(model.intercept_[0])
    return None
