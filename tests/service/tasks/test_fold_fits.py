"""The chunked fold fits of a CLI release (tasks.fold_fits): each chunk is handed its own
folds' rows only (issue 41 §2), and fits the models it fitted when handed every row."""

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression

from conf.models import RunnerConfig
from dpcausal import PrivateATE
from dpcausal.ate.folds import make_folds
from tasks.fold_fits import FitPlan, chunk_rows, with_stored_fits


def _data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    A = (rng.random(n) < 1 / (1 + np.exp(-X[:, 0]))).astype(float)
    Y = 0.3 * X[:, 1] + 0.2 * A + 0.1 * rng.standard_normal(n)
    return X, A, Y


def _models(fm):
    return [m for m in (fm.propensity, fm.mu1, fm.mu0)]


def _same(a, b):
    """The same fitted model: equal constants, or bit-equal coefficients and intercepts of the
    fitted final step (a pipeline's features are stateless)."""
    if a is None or isinstance(a, float):
        return a == b
    a, b = getattr(a, "steps", [(None, a)])[-1][1], getattr(b, "steps", [(None, b)])[-1][1]
    return (np.array_equal(a.coef_, b.coef_) and np.array_equal(a.intercept_, b.intercept_))


def test_chunk_rows_hold_each_fold_of_the_chunk_in_row_order():
    fold_ids = np.array([3, 0, 1, 3, 2, 0, 4, 1, 4])
    chunks = [[0, 3], [1], [4]]  # fold 2 in no chunk
    rows = chunk_rows(fold_ids, chunks)
    assert [r.tolist() for r in rows] == [[0, 1, 3, 5], [2, 7], [6, 8]]


@pytest.mark.parametrize("models", [
    {},  # the defaults: degree-2 logistic and linear models on shared features
    {"propensity_model": LogisticRegression(C=0.5), "outcome_model": LinearRegression()}])
def test_chunked_fits_equal_the_fits_of_every_row(tmp_path, models):
    """A chunk handed only its folds' rows fits, fold by fold, the models it fitted when handed
    all rows (the models of fold k are a function of fold k's rows alone); the release's rows
    may leave out some rows (no usable treatment or outcome): those stay out."""
    X, A, Y = _data()
    est = PrivateATE(n_folds=12, outcome_bounds=(-2.0, 2.0), zeta=1.0, **models)
    fold_ids = make_folds(len(Y), 12, "shuffle", 5)
    keep = np.ones(len(Y), bool)
    keep[::17] = False
    Xk, Ak, Yk, fk = X[keep], A[keep], Y[keep], fold_ids[keep]
    plan = FitPlan(basis="b", models="m", store=None, folds_per_task=5,
                   runner=RunnerConfig(kind="threads", max_workers=2))
    got = with_stored_fits(est, plan).fit_folds(Xk, Ak, Yk, fk, ks=range(12))
    fitter = PrivateATE(**{**est.get_params(deep=False), "estimator": "aipw",
                           "propensity_clip": 1e-12})
    want = [fm for chunk in ([0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11])
            for fm in fitter.fit_folds(Xk, Ak, Yk, fk, ks=chunk)]
    assert [fm.k for fm in got] == list(range(12))
    for a, b in zip(got, want, strict=True):
        assert all(_same(x, y) for x, y in zip(_models(a), _models(b), strict=True)), a.k
    # a frame of covariates is cut by rows too
    frame = pd.DataFrame(Xk, columns=["a", "b", "c"])
    from_frame = with_stored_fits(est, plan).fit_folds(frame, Ak, Yk, fk, ks=range(12))
    assert [fm.k for fm in from_frame] == list(range(12))
