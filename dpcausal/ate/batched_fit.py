"""Batched exact fits of many small ``LinearRegression`` / ``LogisticRegression`` models: the
per-fold nuisances of spec dp_ate_ensemble.md §2.2 step 2 at thousands of folds.

Each problem is one fold (or one arm of a fold) and sees only its own rows: problems are padded
to a common row count with zero-weight rows, which changes no fitted value, so model k is still
a function of fold k's rows alone (§1.3). The fits solve scikit-learn's own problems:

- least squares as ``LinearRegression`` (scipy ``lstsq`` on centred data with cut-off
  ``tol * s_max`` on the singular values: the minimum-norm solution), by a batched SVD;
- ``LogisticRegression``'s L2 problem ``min_w C sum_i log-loss_i + ||coef||^2 / 2`` (intercept
  unpenalised), by batched damped Newton steps run to convergence: scikit-learn's solvers stop
  at ``tol`` on the way to this same optimum.

The returned objects are the scikit-learn classes with their fitted attributes set. A problem
that cannot be solved in floating point (a singular system, a non-finite solution: a covariate
of magnitude 1e15 under degree-2 features) is returned as ``None``, and the caller takes the
fold-local constant of spec §2.7, as for a model whose ``fit`` raises. The other problems of the
batch keep the values the batch gives them: numpy's batched ``solve`` and ``svd`` make one
LAPACK call per problem, so the failed ones are found by trying each alone, then replaced by a
harmless system (the identity, zeros) and their result by NaN.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.special import expit
from sklearn.linear_model import LinearRegression, LogisticRegression

# Padded problems per batch: bounded memory (rows x features x problems entries).
_BATCH_ENTRIES = 2**21
_NEWTON_STEPS = 100
_NEWTON_TOL = 1e-11


def batchable(model: Any) -> bool:
    """Whether ``model`` is a plain least squares or binary L2 logistic regression whose fit this
    module reproduces (generic models keep their own ``fit``)."""
    if type(model) is LinearRegression:
        return not model.positive
    if type(model) is LogisticRegression:
        penalty = model.get_params().get("penalty", "l2")
        return (penalty in ("l2", "deprecated") and model.l1_ratio in (None, 0, 0.0)
                and model.class_weight is None and model.solver != "liblinear"
                and 0 < model.C < math.inf)
    return False


def fit_many(model: Any, X_sorted: np.ndarray, y_sorted: np.ndarray, starts: np.ndarray,
             sizes: np.ndarray) -> list[Any]:
    """Fit ``model`` on each group ``X_sorted[s:s + size]`` (``y`` alike); groups of at least 2
    rows (logistic: both classes present), in the order given; ``None`` for a group whose problem
    has no finite solution in floating point (module docstring)."""
    fitted: list[Any] = [None] * len(starts)
    order = np.argsort(sizes, kind="stable")        # similar sizes share a batch: little padding
    i = 0
    while i < len(order):
        m = max(1, int(sizes[order[i]]))
        take = order[i:i + max(1, _BATCH_ENTRIES // (m * (X_sorted.shape[1] + 1)))]
        take = take[sizes[take] <= 2 * m]           # at most 2x padding (sizes ascend)
        Xp, yp, mask = _padded(X_sorted, y_sorted, starts[take], sizes[take])
        batch = (_least_squares(model, Xp, yp, mask, sizes[take])
                 if type(model) is LinearRegression else _logistic(model, Xp, yp, mask))
        for j, est in zip(take, batch, strict=True):
            fitted[j] = est
        i += len(take)
    return fitted


def _padded(X: np.ndarray, y: np.ndarray, starts: np.ndarray, sizes: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(problems, rows, d) design, (problems, rows) targets and row mask; padding rows are 0."""
    m = int(sizes.max())
    offset = np.arange(m)
    mask = offset[None, :] < sizes[:, None]
    idx = np.where(mask, starts[:, None] + offset[None, :], 0)
    Xp = X[idx]
    Xp[~mask] = 0.0
    yp = np.where(mask, y[idx], 0.0)
    return Xp, yp, mask


def _least_squares(model: LinearRegression, Xp: np.ndarray, yp: np.ndarray, mask: np.ndarray,
                   sizes: np.ndarray) -> list[LinearRegression]:
    """Minimum-norm least squares with sklearn's centring and singular-value cut-off."""
    w = mask.astype(float)
    if model.fit_intercept:
        x_off = np.einsum("pr,prd->pd", w, Xp) / sizes[:, None]
        y_off = (w * yp).sum(axis=1) / sizes
        Xc = (Xp - x_off[:, None, :]) * w[:, :, None]
        yc = (yp - y_off[:, None]) * w
    else:
        x_off = np.zeros((Xp.shape[0], Xp.shape[2]))
        y_off = np.zeros(Xp.shape[0])
        Xc, yc = Xp, yp
    U, s, Vt = _svd(Xc)
    keep = s > model.tol * s[:, :1]
    inv = np.divide(1.0, s, out=np.zeros_like(s), where=keep)
    Uy = np.matmul(U.transpose(0, 2, 1), yc[:, :, None])                  # (P, k, 1)
    coef = np.matmul(Vt.transpose(0, 2, 1), inv[:, :, None] * Uy)[:, :, 0]
    solved = np.isfinite(coef).all(axis=1) & np.isfinite(y_off - (x_off * coef).sum(axis=1))
    out: list[LinearRegression | None] = []
    for p in range(Xp.shape[0]):
        if not solved[p]:
            out.append(None)
            continue
        est = _unfitted_copy(model)
        est.coef_ = coef[p]
        est.intercept_ = float(y_off[p] - x_off[p] @ coef[p]) if model.fit_intercept else 0.0
        est.rank_ = int(keep[p].sum())
        est.singular_ = s[p, :min(int(sizes[p]), Xp.shape[2])]
        est.n_features_in_ = Xp.shape[2]
        out.append(est)
    return out


def _logistic(model: LogisticRegression, Xp: np.ndarray, yp: np.ndarray, mask: np.ndarray
              ) -> list[LogisticRegression | None]:
    """Damped Newton on ``sum_i mask_i (log(1 + e^z_i) - y_i z_i) + ||coef||^2 / (2C)``; a
    problem whose Newton system is singular, or whose iterate is not finite, is ``None``."""
    P, _, d = Xp.shape
    Z = np.concatenate([Xp, mask[:, :, None].astype(float)], axis=2) if model.fit_intercept \
        else Xp
    q = Z.shape[2]
    pen = np.full(q, 1.0 / model.C)
    if model.fit_intercept:
        pen[-1] = 0.0
    w = np.zeros((P, q))
    wm = mask.astype(float)

    def objective(idx: np.ndarray, wt: np.ndarray) -> np.ndarray:
        z = np.matmul(Z[idx], wt[:, :, None])[:, :, 0]
        loss = np.logaddexp(0.0, z) - yp[idx] * z
        return (wm[idx] * loss).sum(axis=1) + 0.5 * (pen * wt * wt).sum(axis=1)

    f = objective(np.arange(P), w)
    active = np.arange(P)
    iterations = np.zeros(P, dtype=np.int64)
    for _ in range(_NEWTON_STEPS):
        if active.size == 0:
            break
        Za, wa = Z[active], w[active]
        prob = expit(np.matmul(Za, wa[:, :, None])[:, :, 0])
        r = wm[active] * (prob - yp[active])
        grad = np.matmul(r[:, None, :], Za)[:, 0, :] + pen * wa
        h = wm[active] * prob * (1.0 - prob)
        H = np.matmul(Za.transpose(0, 2, 1) * h[:, None, :], Za) + np.diag(pen)
        step = _solve(H, grad)
        stuck = ~np.isfinite(step).all(axis=1)
        if stuck.any():                 # no Newton step: no solution (module docstring)
            w[active[stuck]] = np.nan
            active, Za, wa, grad, step = (v[~stuck] for v in (active, Za, wa, grad, step))
            if active.size == 0:
                break
        t = np.ones(active.size)
        f_old = f[active]
        decrease = (grad * step).sum(axis=1)
        # Armijo, with a rounding allowance so that steps at the optimum are taken as they are
        slack = 1e-13 * (1.0 + np.abs(f_old))
        new_w = wa - step
        new_f = objective(active, new_w)
        bad = new_f > f_old - 1e-4 * t * decrease + slack
        for _ in range(60):             # backtracking on the problems that need it
            if not bad.any():
                break
            sub = np.flatnonzero(bad)
            t[sub] /= 2.0
            new_w[sub] = wa[sub] - t[sub, None] * step[sub]
            new_f[sub] = objective(active[sub], new_w[sub])
            bad[sub] = new_f[sub] > f_old[sub] - 1e-4 * t[sub] * decrease[sub] + slack[sub]
        w[active], f[active] = new_w, new_f
        iterations[active] += 1
        moved = np.abs(t[:, None] * step).max(axis=1)
        active = active[moved > _NEWTON_TOL * (1.0 + np.abs(wa).max(axis=1))]
    out: list[LogisticRegression | None] = []
    classes = np.array([0, 1])
    for p in range(P):
        if not np.isfinite(w[p]).all():
            out.append(None)
            continue
        est = _unfitted_copy(model)
        est.coef_ = w[p, None, :d].copy()
        est.intercept_ = np.array([w[p, d] if model.fit_intercept else 0.0])
        est.classes_ = classes
        est.n_features_in_ = d
        est.n_iter_ = np.array([iterations[p]])
        out.append(est)
    return out


def _solve(H: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``np.linalg.solve`` of each problem's ``H x = g``; NaN for a singular one (module
    docstring: the others as the batch gives them, a singular one replaced by the identity)."""
    try:
        return np.linalg.solve(H, g[:, :, None])[:, :, 0]
    except np.linalg.LinAlgError:
        ok = np.array([_lapack_ok(np.linalg.solve, H[p], g[p]) for p in range(len(H))])
    eye = np.broadcast_to(np.eye(H.shape[1]), H.shape)
    x = np.linalg.solve(np.where(ok[:, None, None], H, eye), g[:, :, None])[:, :, 0]
    x[~ok] = np.nan
    return x


def _svd(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The thin ``np.linalg.svd`` of each problem; NaN factors for one LAPACK cannot take (no
    convergence), replaced by zeros in the batch (module docstring)."""
    try:
        return tuple(np.linalg.svd(X, full_matrices=False))  # type: ignore[return-value]
    except np.linalg.LinAlgError:
        ok = np.array([_lapack_ok(np.linalg.svd, X[p]) for p in range(len(X))])
    U, s, Vt = np.linalg.svd(np.where(ok[:, None, None], X, 0.0), full_matrices=False)
    U[~ok] = np.nan
    return U, s, Vt


def _lapack_ok(routine: Any, *args: np.ndarray) -> bool:
    try:
        routine(*args)
    except np.linalg.LinAlgError:
        return False
    return True


def _unfitted_copy(model: Any) -> Any:
    """A shallow copy of an unfitted estimator (its parameters are immutable scalars here),
    without ``copy.copy``'s reduce protocol, which costs tens of microseconds per model."""
    est = object.__new__(type(model))
    est.__dict__.update(model.__dict__)
    return est


def group_bounds(keys: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, starts, sizes): a stable sort of rows by integer key in [0, n_groups), each
    group's first position in that order and its size (rows stay ascending within a group)."""
    order = np.argsort(keys, kind="stable")
    sizes = np.bincount(keys, minlength=n_groups)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return order, starts, sizes
