"""The vectorised estimator against a loop-based reference (issue 3; spec §5 item 8)."""

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from dpcausal import PrivateATE
from tests.library.ate._reference import reference_ate


def _converged_logistic(C=1.0):
    """scikit-learn's LogisticRegression(C=C) problem solved to convergence: the batched fit
    (dpcausal.ate.batched_fit) solves it exactly, where the default lbfgs stops at tol=1e-4."""
    return LogisticRegression(C=C, solver="newton-cholesky", tol=1e-12, max_iter=1000)


def _data(n, d, seed):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    A = rng.binomial(1, 1 / (1 + np.exp(-X[:, 0])))
    Y = 0.3 * X[:, -1] + 0.2 * A + rng.normal(0, 0.3, n)   # some values fall outside (-1, 1)
    return X, A, Y


@pytest.mark.parametrize("estimator", ["g", "ipw", "aipw"])
@pytest.mark.parametrize("models", ["linear", "trees"])
def test_sigma_zero_matches_loop_reference(estimator, models):
    X, A, Y = _data(240, 3, seed=7)
    if models == "linear":
        prop, out = _converged_logistic(), LinearRegression()
    else:
        prop, out = (DecisionTreeClassifier(max_depth=2, random_state=0),
                     DecisionTreeRegressor(max_depth=2, random_state=0))
    K, bounds, eta = 6, (-1.0, 1.0), 0.1
    est = PrivateATE(estimator=estimator, propensity_model=prop, outcome_model=out, n_folds=K,
                     folds="contiguous", outcome_bounds=bounds, propensity_clip=eta, random_state=0)
    rel = est.fit(X, A, Y, evaluation=True)
    assert rel.nonprivate["n_clipped"] > 0          # the reference clips too
    tau, var = reference_ate(X, A, Y, K, estimator, prop, out, bounds, eta)
    assert abs(rel.nonprivate["ate"] - tau) < 1e-10
    assert abs(rel.nonprivate["variance"] - var) < 1e-10 * max(1.0, var)


def test_asymmetric_bounds_shift_trick_keeps_estimate():
    """G/AIPW scores are shift-invariant (spec §1.2): bounds (0, 2) vs the reference on raw Y."""
    X, A, Y = _data(300, 2, seed=3)
    Y = np.clip(Y + 1.0, 0.0, 2.0)
    est = PrivateATE(estimator="aipw", n_folds=5, folds="contiguous", outcome_bounds=(0.0, 2.0),
                     propensity_clip=0.1, random_state=0, propensity_model=LogisticRegression(),
                     outcome_model=LinearRegression())
    rel = est.fit(X, A, Y, evaluation=True)
    tau, var = reference_ate(X, A, Y, 5, "aipw", _converged_logistic(), LinearRegression(),
                             (0.0, 2.0), 0.1)
    assert abs(rel.nonprivate["ate"] - tau) < 1e-10
    assert rel.noise["B_mu"] == 1.0          # half-width, not max |bound| = 2


@pytest.mark.parametrize("estimator", ["g", "ipw", "aipw"])
def test_k2_reduces_to_two_fold_cross_fitting(estimator):
    """Spec §5 item 8: with K=2 each row uses exactly the other fold's models (1/pi of one
    model); the default models are degree-2 features, then logistic (C = 10^4, written out
    here) / least squares."""
    X, A, Y = _data(200, 2, seed=11)
    F = np.column_stack([X, X[:, 0] ** 2, X[:, 0] * X[:, 1], X[:, 1] ** 2])   # by hand
    Y = np.clip(Y, -1, 1)
    eta = 0.05
    est = PrivateATE(estimator=estimator, n_folds=2, folds="contiguous", propensity_clip=eta,
                     random_state=0, outcome_bounds=(-1, 1))
    rel = est.fit(X, A, Y, evaluation=True)
    halves = [np.arange(100), np.arange(100, 200)]
    gamma = np.empty(200)
    for train, test in (halves, halves[::-1]):
        p = np.clip(_converged_logistic(1e4).fit(F[train], A[train]).predict_proba(F[test])[:, 1],
                    eta, 1 - eta)
        t1, t0 = train[A[train] == 1], train[A[train] == 0]
        m1 = np.clip(LinearRegression().fit(F[t1], Y[t1]).predict(F[test]), -1, 1)
        m0 = np.clip(LinearRegression().fit(F[t0], Y[t0]).predict(F[test]), -1, 1)
        a, y = A[test], Y[test]
        gamma[test] = {
            "g": m1 - m0,
            "ipw": a * y / p - (1 - a) * y / (1 - p),
            "aipw": m1 - m0 + a * (y - m1) / p - (1 - a) * (y - m0) / (1 - p),
        }[estimator]
    assert abs(rel.nonprivate["ate"] - gamma.mean()) < 1e-12
    assert abs(rel.nonprivate["variance"] - gamma.var(ddof=1) / 200) < 1e-12


def test_stacked_linear_path_equals_generic_predict():
    """The coefficient-stacking fast path gives the same aggregates as per-model predict calls."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    X, A, Y = _data(500, 4, seed=5)
    Y = np.clip(Y, -1, 1)
    ident = FunctionTransformer()            # a Pipeline is never stacked: the generic path
    fast = PrivateATE(n_folds=10, random_state=1, noise_seed=1,
                      propensity_model=LogisticRegression(), outcome_model=LinearRegression(),
                      outcome_bounds=(-1, 1)).fit(X, A, Y, evaluation=True)
    slow = PrivateATE(n_folds=10, random_state=1, noise_seed=1,
                      propensity_model=make_pipeline(ident, _converged_logistic()),
                      outcome_model=make_pipeline(ident, LinearRegression()),
                      outcome_bounds=(-1, 1)).fit(X, A, Y, evaluation=True)
    assert abs(fast.nonprivate["ate"] - slow.nonprivate["ate"]) < 1e-10
    assert fast.ate == slow.ate               # same seed: the same noise draw


def test_chunking_does_not_change_the_estimate():
    X, A, Y = _data(301, 2, seed=9)
    Y = np.clip(Y, -1, 1)
    whole = PrivateATE(n_folds=7, random_state=2,
                       outcome_bounds=(-1, 1)).fit(X, A, Y, evaluation=True)
    chunked = PrivateATE(n_folds=7, random_state=2, chunk_size=13,
                         outcome_bounds=(-1, 1)).fit(X, A, Y, evaluation=True)
    assert whole.nonprivate == chunked.nonprivate
