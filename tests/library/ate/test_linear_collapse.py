"""The exact collapse of the out-of-fold mean for linear outcome models (issue 19 §2): equal to
the brute-force clipped mean where it claims exactness, never claiming it where a prediction is
clipped, and local (fold k's rows never read model k)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpcausal.ate.linear_collapse import collapsed_means, leave_one_out


def _brute(X, fold_ids, coef, intercept, lo, hi):
    pred = X @ coef + intercept                           # (n, K)
    clipped = np.clip(pred, lo, hi)
    own = np.zeros_like(pred, dtype=bool)
    own[np.arange(len(X)), fold_ids] = True
    means = np.where(own, 0.0, clipped).sum(axis=1) / (coef.shape[1] - 1)
    touched = ((pred < lo) | (pred > hi)) & ~own
    return means, touched.any(axis=1)


def _problem(seed, n=400, d=3, K=7, spread=0.05):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    coef = rng.normal(0.1, spread, size=(d, K))
    intercept = rng.normal(0.5, spread, size=K)
    fold_ids = rng.integers(0, K, size=n)
    return X, fold_ids, coef, intercept


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), spread=st.sampled_from([0.01, 0.1, 1.0]),
       K=st.integers(2, 12))
def test_equal_to_brute_force_where_exact_and_never_exact_where_clipped(seed, spread, K):
    X, fold_ids, coef, intercept = _problem(seed, K=K, spread=spread)
    means, exact = collapsed_means(X, fold_ids, coef, intercept, (0.0, 1.0))
    ref, clipped = _brute(X, fold_ids, coef, intercept, 0.0, 1.0)
    np.testing.assert_allclose(means[exact], ref[exact], rtol=0, atol=1e-12)
    assert not np.any(exact & clipped)
    assert np.all(np.isnan(means[~exact]))


def test_most_rows_take_the_exact_path_when_bounds_are_wide():
    X, fold_ids, coef, intercept = _problem(1, n=2000, spread=0.01)
    _, exact = collapsed_means(X, fold_ids, coef, intercept, (-10.0, 10.0))
    assert exact.mean() > 0.99


def test_fold_k_rows_do_not_depend_on_model_k_bit_for_bit():
    X, fold_ids, coef, intercept = _problem(2, spread=0.01)
    changed_coef, changed_b = coef.copy(), intercept.copy()
    changed_coef[:, 3] += 5.0
    changed_b[3] -= 2.0
    a, ea = collapsed_means(X, fold_ids, coef, intercept, (-10.0, 10.0))
    b, eb = collapsed_means(X, fold_ids, changed_coef, changed_b, (-10.0, 10.0))
    rows = fold_ids == 3
    assert np.array_equal(ea[rows], eb[rows])
    assert np.array_equal(a[rows], b[rows], equal_nan=True)
    assert not np.array_equal(a[~rows], b[~rows], equal_nan=True)  # the others do depend on it


def test_leave_one_out_sums_and_boxes_by_hand():
    coef = np.array([[1.0, 2.0, 4.0]])
    loo = leave_one_out(coef, np.array([0.5, -1.0, 3.0]))
    assert loo["sum"][:, 0].tolist() == [6.0, 5.0, 3.0]
    assert loo["max"][:, 0].tolist() == [4.0, 4.0, 2.0]
    assert loo["min"][:, 0].tolist() == [2.0, 1.0, 1.0]
    assert loo["bsum"].tolist() == [2.0, 3.5, -0.5]
    with pytest.raises(ValueError, match="at least 2 folds"):
        from dpcausal.ate.linear_collapse import collapsed_means as cm
        cm(np.zeros((2, 1)), np.zeros(2, dtype=int), coef[:, :1], np.zeros(1), (0, 1))
