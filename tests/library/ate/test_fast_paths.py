"""The large-K fast paths (issue 19 §2): batched fits equal scikit-learn's, and the fused /
collapsed aggregation equals the generic per-model path, including rows the collapse cannot
clear, fallback constants among the fold models, and overflowing predictions."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.linear_model import LinearRegression, LogisticRegression

from dpcausal.ate.aggregation import (
    _clipped,
    _inverse_propensities,
    _oof_means,
    _PredictionPlan,
    aggregate,
)
from dpcausal.ate.batched_fit import batchable, fit_many, group_bounds
from dpcausal.ate.folds import fold_rows, make_folds
from dpcausal.ate.linear_collapse import collapsed_means
from dpcausal.ate.nuisance import FoldModels, fit_fold, fit_folds
from dpcausal.ate.scores import ate_and_variance, scores


def _converged(**params):
    """scikit-learn's logistic problem solved to convergence (its default stops at tol=1e-4)."""
    return LogisticRegression(solver="newton-cholesky", tol=1e-12, max_iter=1000, **params)


def _groups(seed, sizes, d, rank_deficient=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(sum(sizes), d)) * rng.uniform(0.1, 5, size=d)
    if rank_deficient:
        X[:, 2] = 2.0 * X[:, 0] - X[:, 1]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    return X, starts, np.asarray(sizes, dtype=np.int64), rng


@pytest.mark.parametrize("params", [{}, {"fit_intercept": False}, {"tol": 1e-2}])
@pytest.mark.parametrize("rank_deficient", [False, True])
def test_batched_least_squares_is_sklearns_fit(params, rank_deficient):
    sizes = [2, 3, 4, 7, 7, 8, 40, 2, 33]
    X, starts, sizes_a, rng = _groups(1, sizes, 4, rank_deficient)
    y = X @ rng.normal(size=4) + rng.normal(size=len(X))
    ours = fit_many(LinearRegression(**params), X, y, starts, sizes_a)
    for s, m, est in zip(starts, sizes_a, ours, strict=True):
        ref = LinearRegression(**params).fit(X[s:s + m], y[s:s + m])
        np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-9, atol=1e-10)
        assert est.rank_ == ref.rank_ and type(est) is LinearRegression


@pytest.mark.parametrize("params", [{}, {"C": 0.05}, {"C": 20.0}, {"fit_intercept": False}])
def test_batched_logistic_is_sklearns_converged_fit(params):
    sizes = [6, 9, 25, 25, 26, 60, 8]
    X, starts, sizes_a, rng = _groups(2, sizes, 3)
    p = 1 / (1 + np.exp(-(X @ np.array([1.0, -0.5, 0.3]) + 0.2)))
    A = rng.binomial(1, p).astype(float)
    for s in starts:                                     # both classes in every group
        A[s], A[s + 1] = 0.0, 1.0
    A[starts[-1]:starts[-1] + 8] = [0, 1, 0, 0, 1, 1, 0, 1]  # and a separable-looking one
    ours = fit_many(LogisticRegression(**params), X, A, starts, sizes_a)
    for s, m, est in zip(starts, sizes_a, ours, strict=True):
        ref = _converged(**params).fit(X[s:s + m], A[s:s + m])
        np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-7, atol=1e-8)
        np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-7, atol=1e-8)
        Z = rng.normal(size=(5, 3))
        np.testing.assert_allclose(est.predict_proba(Z), ref.predict_proba(Z), atol=1e-9)


def test_only_plain_l2_models_are_batched():
    assert batchable(LogisticRegression()) and batchable(LinearRegression())
    assert not batchable(LinearRegression(positive=True))
    assert not batchable(LogisticRegression(class_weight="balanced"))
    assert not batchable(LogisticRegression(solver="liblinear"))
    assert not batchable(LogisticRegression(C=np.inf))
    assert not batchable(LogisticRegression(l1_ratio=1.0, solver="saga"))


def _data(n=3000, d=3, seed=0, spread=0.4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    A = rng.binomial(1, 1 / (1 + np.exp(-X[:, 0])))
    Y = np.clip(0.5 + spread * X[:, 1] + 0.1 * A + rng.normal(0, 0.2, n), 0, 1)
    return X, A, Y


def _fit_kwargs(estimator="aipw"):
    return dict(estimator=estimator, propensity_model=_converged(),
                outcome_model=LinearRegression(), propensity_clip=0.2)


def test_batched_fold_fits_equal_fold_by_fold_fits_with_fallbacks():
    X, A, Y = _data(n=600)
    K = 30
    fold_ids = make_folds(len(Y), K, "shuffle", 3)
    A[fold_ids == 4] = 1                       # constant treatment: the propensity fallback
    mask5 = fold_ids == 5                      # one treated unit: the mu1 fallback (its Y)
    A[mask5] = 0
    A[np.flatnonzero(mask5)[0]] = 1
    A[fold_ids == 6] = 0                       # empty treated arm: mu1 is None
    A[np.flatnonzero(fold_ids == 6)[0]] = 1
    A[np.flatnonzero(fold_ids == 6)[0]] = 0
    ks = [6, 0, 5, 4, 29]
    rows = np.isin(fold_ids, ks)               # a partition holding only the folds ks
    fast = fit_folds(X[rows], A[rows], Y[rows], fold_ids[rows], ks, **_fit_kwargs())
    for k, got in zip(ks, fast, strict=True):
        ref = fit_fold(X, A, Y, fold_rows(fold_ids, k), k, **_fit_kwargs())
        assert got.k == k
        for name in ("propensity", "mu1", "mu0"):
            a, b = getattr(got, name), getattr(ref, name)
            if b is None or isinstance(b, float):
                assert a == b, (k, name)
            else:
                np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-7, atol=1e-8)
                np.testing.assert_allclose(a.intercept_, b.intercept_, rtol=1e-7, atol=1e-8)
    assert fast[3].propensity == 0.8 and fast[0].mu1 is None
    assert fast[2].mu1 == float(Y[mask5][A[mask5] == 1][0])


class _OpaqueRegressor(BaseEstimator):
    """A fitted model behind a plain predict: never stacked (the generic path)."""

    def __init__(self, model=None):
        self.model = model

    def predict(self, X):
        return self.model.predict(X)


class _OpaqueClassifier(ClassifierMixin, BaseEstimator):
    def __init__(self, model=None):
        self.model = model
        self.classes_ = None if model is None else model.classes_

    def predict_proba(self, X):
        return self.model.predict_proba(X)


def _generic(fold_models):
    def wrap(m):
        if m is None or isinstance(m, float):
            return m
        return _OpaqueClassifier(m) if hasattr(m, "classes_") else _OpaqueRegressor(m)
    return [FoldModels(fm.k, wrap(fm.propensity), wrap(fm.mu1), wrap(fm.mu0))
            for fm in fold_models]


def _estimate(X, A, Y, fold_ids, models, estimator, bounds=(0.0, 1.0)):
    nuis = aggregate(X, fold_ids, models, estimator=estimator, outcome_bounds=bounds,
                     propensity_clip=0.2)
    return nuis, ate_and_variance(scores(estimator, A, Y, nuis, centre=0.5))


@pytest.mark.parametrize("estimator", ["g", "ipw", "aipw"])
def test_fast_aggregation_equals_the_generic_path(estimator):
    X, A, Y = _data(n=3000, seed=1)
    K = 40
    fold_ids = make_folds(len(Y), K, "shuffle", 1)
    models = fit_folds(X, A, Y, fold_ids, range(K), **_fit_kwargs(estimator))
    if estimator != "ipw":
        # constants among the stacked models: a fallback mean and an empty arm (centre)
        models[3] = FoldModels(3, models[3].propensity, 0.7, models[3].mu0)
        models[7] = FoldModels(7, models[7].propensity, models[7].mu1, None)
        coef = np.column_stack([m.mu1.coef_ if hasattr(m.mu1, "coef_") else np.zeros(3)
                                for m in models])
        icpt = np.array([m.mu1.intercept_ if hasattr(m.mu1, "coef_") else 0.7
                         for m in models])
        _, exact = collapsed_means(X, fold_ids, coef, icpt, (0.0, 1.0))
        assert 0.05 < exact.mean() < 0.95        # both the collapse and the slow path run
    fast, (tau_f, v_f) = _estimate(X, A, Y, fold_ids, models, estimator)
    slow, (tau_s, v_s) = _estimate(X, A, Y, fold_ids, _generic(models), estimator)
    assert abs(tau_f - tau_s) < 1e-9 and abs(v_f - v_s) < 1e-9 * max(1.0, v_s)
    for name in ("inv_pi1", "inv_pi0", "mu1", "mu0"):
        a, b = getattr(fast, name), getattr(slow, name)
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    assert fast.n_folds == K


def test_fast_aggregation_is_local_bit_for_bit():
    """Changing model k leaves fold k's aggregates unchanged, bit for bit (spec §5 item 2)."""
    X, A, Y = _data(n=2000, seed=2)
    K = 25
    fold_ids = make_folds(len(Y), K, "shuffle", 2)
    models = fit_folds(X, A, Y, fold_ids, range(K), **_fit_kwargs())
    changed = list(models)
    m = models[9]
    prop, mu1 = _converged().fit(X[:50], 1 - A[:50]), LinearRegression().fit(X[:40], -Y[:40])
    changed[9] = FoldModels(9, prop, mu1, m.mu0)
    a, _ = _estimate(X, A, Y, fold_ids, models, "aipw")
    b, _ = _estimate(X, A, Y, fold_ids, changed, "aipw")
    rows = fold_ids == 9
    for name in ("inv_pi1", "inv_pi0", "mu1", "mu0"):
        assert np.array_equal(getattr(a, name)[rows], getattr(b, name)[rows])
    assert not np.array_equal(a.inv_pi1[~rows], b.inv_pi1[~rows])
    assert not np.array_equal(a.mu1[~rows], b.mu1[~rows])


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_overflowing_predictions_take_the_blocked_path():
    """Where a prediction can overflow, the fused pass hands its block to the blocked path,
    which replaces non-finite predictions by the public constant."""
    X, A, Y = _data(n=500, seed=4)
    K = 10
    fold_ids = make_folds(len(Y), K, "shuffle", 4)
    models = fit_folds(X, A, Y, fold_ids, range(K), **_fit_kwargs())
    k = (fold_ids[17] + 1) % K                  # a model row 17 aggregates: 1e310 - 1e310
    models[k].propensity.coef_ = np.array([[1e300, -1e300, 0.0]])
    models[k].mu1.coef_ = np.array([1e300, -1e300, 0.0])
    X = X.copy()
    X[17] = [1e10, 1e10, 0.0]
    fast, (tau, _) = _estimate(X, A, Y, fold_ids, models, "aipw")
    assert np.isfinite(tau)
    plan = _PredictionPlan([m.propensity for m in models], 0.5)
    inv1, inv0 = _oof_means(X, fold_ids, plan, _inverse_propensities(0.2), 2, 64, 1)
    plan = _PredictionPlan([m.mu1 for m in models], 0.5)
    (mu1,) = _oof_means(X, fold_ids, plan, _clipped(0.0, 1.0), 1, 64, 1)
    for got, ref in ((fast.inv_pi1, inv1), (fast.inv_pi0, inv0), (fast.mu1, mu1)):
        np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_group_bounds_keep_rows_ascending_within_a_group():
    keys = np.array([2, 0, 2, 1, 0, 2])
    order, starts, sizes = group_bounds(keys, 4)
    assert order.tolist() == [1, 4, 3, 0, 2, 5]
    assert starts.tolist() == [0, 2, 3, 6] and sizes.tolist() == [2, 1, 3, 0]


def test_a_fold_whose_batched_fit_fails_takes_its_constant_and_leaves_the_others():
    """Spec §2.7 in the batched fits: a fold whose own problem cannot be solved (a covariate
    constant at 1e20 in fold 7: its logistic Hessian is singular in floating point) takes the
    fold-local constant, counted as a failed fit, and every other fold keeps the model it gets
    without fold 7 (a fold's model is a function of its own rows, spec §1.3). The batched fit
    raised LinAlgError for the whole batch, after the charge."""
    X, A, Y = _data(n=600)
    fold_ids = make_folds(len(Y), 30, "shuffle", 3)
    bad = fold_ids == 7
    X[bad, 0] = 1e20
    kwargs = dict(estimator="aipw", propensity_model=LogisticRegression(C=1e4),
                  outcome_model=LinearRegression(), propensity_clip=0.2)
    got = fit_folds(X, A, Y, fold_ids, list(range(30)), **kwargs)
    assert got[7].propensity == float(np.clip(A[bad].mean(), 0.2, 0.8))
    assert got[7].failed == 1 and sum(fm.failed for fm in got) == 1
    rest = [k for k in range(30) if k != 7]
    alone = fit_folds(X[~bad], A[~bad], Y[~bad], fold_ids[~bad], rest, **kwargs)
    for a, b in zip([fm for fm in got if fm.k != 7], alone, strict=True):
        for name in ("propensity", "mu1", "mu0"):
            x, y = getattr(a, name), getattr(b, name)
            np.testing.assert_allclose(x.coef_, y.coef_, rtol=1e-12, atol=0)
            np.testing.assert_allclose(x.intercept_, y.intercept_, rtol=1e-12, atol=1e-15)


@pytest.mark.filterwarnings("ignore::dpcausal.validation.FoldBiasWarning")  # small folds
def test_a_warehouse_bigint_covariate_releases_with_the_default_models():
    """A covariate as a warehouse holds it (a bigint above 2^53: balances in cents, epoch
    nanoseconds) under the default degree-2 models: its square, about 8e31, made the batched
    logistic Hessians of small folds singular and the release raised LinAlgError after the
    charge (seen on PostgreSQL, 300,000 rows, K = 3,000). The failing folds take their §2.7
    constants, and the release is finite in both modes."""
    from dpcausal import PrivateATE

    rng = np.random.default_rng(0)
    n = 20_000
    X = np.column_stack([rng.standard_normal((n, 2)),
                         2.0 ** 53 + rng.integers(0, 300_000, n) * 1_000_003.0])
    A = (rng.random(n) < 0.5).astype(int)
    Y = np.clip(0.2 * A + 0.3 * X[:, 1] + rng.normal(0, .2, n), -1, 1)
    est = PrivateATE(estimator="aipw", outcome_bounds=(-1, 1), zeta=1.0, n_folds=1000)
    rel = est.fit(X, A, Y, evaluation=True)
    assert np.isfinite([rel.ate, *rel.ci, rel.nonprivate["ate"]]).all()
    assert rel.nonprivate["failed_fits"] > 0
    assert np.isfinite(est.fit(X, A, Y).ate)
