"""Exact O(n·d) out-of-fold means for linear outcome models: a large K costs no K-fold pass.

The ensemble outcome nuisance of row i is the mean of the K-1 clipped predictions of the models
not trained on its fold (spec dp_ate_ensemble.md §2.2 step 3, eq. 5):

.. math:: \\bar\\mu(x_i) = \\frac{1}{K-1} \\sum_{j \\ne k(i)} \\mathrm{clip}(x_i^T\\beta_j + b_j,
          lo, hi).

When no prediction reaches the bounds the clip is the identity and the sum collapses to
``x_i^T S_{-k} + s_{-k}`` with ``S_{-k} = sum_{j != k} beta_j`` (and ``s_{-k}`` for the
intercepts): O(d) per row instead of O(K d). Whether any prediction can reach the bounds is
decided by interval arithmetic over the box ``[min_{j != k} beta_j, max_{j != k} beta_j]``
(coordinate-wise, with the intercepts' range), which contains every leave-one-out model.

Both ``S_{-k}`` and the box are built from exclusive prefix and suffix sums/extrema, so neither
involves model k itself: the aggregates of fold k's rows are computed without ever reading model
k, as on the blocked path (locality, spec §5 item 2). Floating-point sums differ from the blocked
path's by rounding only; the release's lattice step (``dpcausal.noise``) adds a margin to the
sensitivity far larger than that.
"""

from __future__ import annotations

import numpy as np


def _exclusive(values: np.ndarray, op: np.ufunc, identity: float) -> np.ndarray:
    """``out[k] = op over values[j], j != k`` along axis 0, from prefix and suffix scans."""
    pad = np.full((1,) + values.shape[1:], identity)
    prefix = op.accumulate(np.concatenate([pad, values[:-1]]), axis=0)
    suffix = op.accumulate(np.concatenate([pad, values[:0:-1]]), axis=0)[::-1]
    return op(prefix, suffix)


def leave_one_out(coef: np.ndarray, intercept: np.ndarray) -> dict[str, np.ndarray]:
    """Per fold k, from the K fold models (``coef`` (d, K), ``intercept`` (K,)): the sums
    ``S_{-k}``, ``s_{-k}`` and the coefficient box and intercept range over ``j != k``."""
    B = np.ascontiguousarray(coef.T)                  # (K, d)
    b = np.asarray(intercept, dtype=float)[:, None]   # (K, 1)
    return {
        "sum": _exclusive(B, np.add, 0.0), "bsum": _exclusive(b, np.add, 0.0)[:, 0],
        "max": _exclusive(B, np.maximum, -np.inf), "min": _exclusive(B, np.minimum, np.inf),
        "bmax": _exclusive(b, np.maximum, -np.inf)[:, 0],
        "bmin": _exclusive(b, np.minimum, np.inf)[:, 0],
    }


def collapsed_means(X: np.ndarray, fold_ids: np.ndarray, coef: np.ndarray,
                    intercept: np.ndarray, bounds: tuple[float, float]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(means, exact): the out-of-fold mean of every row whose K-1 predictions provably stay
    inside ``bounds`` (``exact`` True there), and NaN with ``exact`` False for the other rows,
    which need the blocked path."""
    K = coef.shape[1]
    if K < 2:
        raise ValueError("the out-of-fold mean needs at least 2 folds")
    lo, hi = bounds
    loo = leave_one_out(coef, intercept)
    n = X.shape[0]
    means = np.empty(n)
    exact = np.empty(n, dtype=bool)
    step = 1 << 11      # rows per pass: 80 KiB temporaries, under glibc's mmap threshold
    for start in range(0, n, step):
        rows = slice(start, min(n, start + step))
        x, k = X[rows], fold_ids[rows]
        upper_box, lower_box = loo["max"][k], loo["min"][k]
        top = np.maximum(x * upper_box, x * lower_box).sum(axis=1) + loo["bmax"][k]
        bottom = np.minimum(x * upper_box, x * lower_box).sum(axis=1) + loo["bmin"][k]
        ok = (bottom >= lo) & (top <= hi)
        value = (np.einsum("ij,ij->i", x, loo["sum"][k]) + loo["bsum"][k]) / (K - 1)
        means[rows] = np.where(ok, value, np.nan)
        exact[rows] = ok
    return means, exact

