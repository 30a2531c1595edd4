"""Per-fold nuisance fitting (dpcausal.ate.nuisance): the least-squares fast path is sklearn's
fit."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression

from dpcausal.ate.nuisance import _fit_outcome


def _shapes():
    rng = np.random.default_rng(4)
    for n, d in ((2, 1), (2, 5), (3, 2), (7, 3), (40, 6), (500, 2)):
        X = rng.normal(size=(n, d)) * rng.uniform(0.1, 30, size=d)
        if d >= 3:
            X[:, 2] = 2.0 * X[:, 0] - X[:, 1]  # collinear: rank-deficient least squares
        yield X, rng.normal(size=n) + X @ rng.normal(size=d)
    X = rng.normal(size=(50, 2))
    X[:, 1] = X[:, 0] + 1e-4 * rng.normal(size=50)  # nearly collinear: the cutoff ``tol`` matters
    yield X, X[:, 0] + rng.normal(size=50)


@pytest.mark.parametrize("params", [{}, {"fit_intercept": False}, {"tol": 1e-2}])
def test_least_squares_fast_path_is_sklearns_fit(params):
    for X, y in _shapes():
        ours = _fit_outcome(LinearRegression(**params), X, y)
        ref = LinearRegression(**params).fit(X, y)
        np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ours.intercept_, ref.intercept_, rtol=1e-12, atol=1e-12)
        assert ours.rank_ == ref.rank_ and ours.n_features_in_ == ref.n_features_in_
        Z = np.random.default_rng(1).normal(size=(9, X.shape[1]))
        np.testing.assert_allclose(ours.predict(Z), ref.predict(Z), rtol=1e-11, atol=1e-11)


def test_positive_least_squares_stays_with_sklearn():
    X = np.random.default_rng(0).normal(size=(30, 3))
    y = X @ np.array([1.0, -2.0, 0.5])
    fitted = _fit_outcome(LinearRegression(positive=True), X, y)
    assert (fitted.coef_ >= 0).all() and fitted.coef_[1] == 0.0
