"""Ensemble aggregation of out-of-fold predictions: spec dp_ate_ensemble.md §2.2 step 3 (eq. 5),
§2.7.

For row i the K-1 models not trained on i's fold are combined: the harmonic mean for pi and,
separately, for 1 - pi (stored as the means of the inverses, as the authors' code does), and the
arithmetic mean for mu_1, mu_0. Predictions are clipped first (Assumption 4, §1.2); before that,
every non-finite prediction, and every prediction call that raises or returns a wrong shape, is
replaced by a public constant (the centre of the outcome bounds; 1/2 for a propensity): clipping
lets NaN through, and a model that returns NaN only when trained on one record would otherwise
publish NaN for one neighbour and a number for the other.

Memory is O(n + block): rows are streamed in cache-sized blocks of (rows x K) predictions, and
inside a block each row's own-fold entry is set to exactly 0.0 before the row sum, so a change
to model k leaves the aggregates of fold k's rows bit-for-bit unchanged (locality, spec §5 item 2).
Blocks are spread over threads (numpy releases the GIL in its kernels).

Fast large-K paths, used when every fold model of a nuisance is a plain
``LinearRegression`` (outcomes) or binary ``LogisticRegression`` (propensity), fallback constants
included, and X is a float array; they equal the blocked path up to floating-point rounding:

- propensity: one fused pass per block on the logits z (clip, then e^z, whose sum and whose
  reciprocals' sum give the two harmonic means, since 1/p = 1 + e^-z and 1/(1-p) = 1 + e^z);
  the own fold's logit is set to exactly 0 (e^0 = 1, subtracted after the sum), so model k
  never touches fold k's aggregates;
- outcomes: the exact collapse of the mean (:mod:`dpcausal.ate.linear_collapse`) on every row where
  no out-of-fold prediction can reach the bounds; the fused clipped-mean pass for the others.
"""

from __future__ import annotations

import functools
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Sequence

import numpy as np
from scipy.special import expit
from threadpoolctl import ThreadpoolController

from dpcausal.ate.features import unwrap_fold_models
from dpcausal.ate.linear_collapse import collapsed_means
from dpcausal.ate.nuisance import FoldModels, linear_form, predict_nuisance, take_rows
from dpcausal.validation import guarded, private_log

# Predictions per block: 2**17 float64 = 1 MiB for stacked linear/logistic models (stays in cache
# between the passes); 2**21 for other models, whose cost is the number of predict calls.
_BLOCK_ENTRIES = 2**17
_GENERIC_BLOCK_ENTRIES = 2**21
# Fused stacked kernels: blocks of rows x tiles of fold models (128 x 1024 float64 = 1 MiB).
_FUSED_ROWS = 128
_FUSED_COLS = 1024
_MAX_FUSED_ROWS = 2048      # a larger chunk_size still keeps a tile at 16 MiB
_SAFE_MAGNITUDE = 1e300     # |predictions| below this cannot overflow in the fused passes


@dataclass(frozen=True)
class EnsembleNuisances:
    """Aggregated nuisances per row (non-private). ``None`` when the estimator does not need one.

    inv_pi1 = mean_{k != k(i)} 1/pi_hat^(k)(X_i)        (= 1 / pi_hat_1(i), harmonic)
    inv_pi0 = mean_{k != k(i)} 1/(1 - pi_hat^(k)(X_i))  (= 1 / (1 - pi_hat_0(i)), harmonic)
    mu1, mu0 = mean_{k != k(i)} mu_hat_a^(k)(X_i)        (arithmetic, on the outcome's scale)
    """

    inv_pi1: np.ndarray | None
    inv_pi0: np.ndarray | None
    mu1: np.ndarray | None
    mu0: np.ndarray | None
    n_folds: int | None = None      # K of the fold models aggregated (public)


def aggregate(
    X: np.ndarray,
    fold_ids: np.ndarray,
    fold_models: Sequence[FoldModels],
    *,
    estimator: str,
    outcome_bounds: tuple[float, float],
    propensity_clip: float,
    chunk_size: int | None = None,
    n_threads: int | None = None,
) -> EnsembleNuisances:
    """Eq. 5 with clipped fold predictions, streamed over row blocks: spec §2.2 step 3, §2.7
    step 3."""
    K = len(fold_models)
    if [fm.k for fm in fold_models] != list(range(K)):
        raise ValueError("fold_models must be ordered by fold id 0..K-1")
    X, fold_models = unwrap_fold_models(X, fold_models)   # a shared row-wise feature map
    lo, hi = outcome_bounds
    eta = propensity_clip
    threads = n_threads or min(2, os.cpu_count() or 1)
    stackable = isinstance(X, np.ndarray)       # a DataFrame goes to the models as it is
    # tiles of about _FUSED_ROWS x _FUSED_COLS entries (1 MiB): more rows when K is small, as
    # in a block of K' folds (spec §2.5b), so that the per-tile overhead is amortised
    fused_rows = min(chunk_size or max(_FUSED_ROWS, _FUSED_ROWS * _FUSED_COLS // K),
                     _MAX_FUSED_ROWS)
    out: dict[str, np.ndarray | None] = {}
    with one_blas_thread():     # parallel over blocks, not in BLAS
        if estimator in ("ipw", "aipw"):
            plan = _PredictionPlan([fm.propensity for fm in fold_models], 0.5, stackable)
            if plan.kind == "logistic":
                out["inv_pi1"], out["inv_pi0"] = _fused_inverse_propensities(
                    X, fold_ids, plan, eta, fused_rows, threads)
            else:
                out["inv_pi1"], out["inv_pi0"] = _oof_means(
                    X, fold_ids, plan, _inverse_propensities(eta), 2, chunk_size or plan.rows,
                    threads)
        if estimator in ("g", "aipw"):
            for arm in ("mu1", "mu0"):
                plan = _PredictionPlan([getattr(fm, arm) for fm in fold_models], (lo + hi) / 2,
                                       stackable)
                if plan.kind == "linear":
                    out[arm] = _collapsed_outcome_means(X, fold_ids, plan, lo, hi,
                                                        fused_rows, threads)
                else:
                    (out[arm],) = _oof_means(X, fold_ids, plan, _clipped(lo, hi), 1,
                                             chunk_size or plan.rows, threads)
    return EnsembleNuisances(out.get("inv_pi1"), out.get("inv_pi0"), out.get("mu1"),
                             out.get("mu0"), n_folds=K)


def _fused_inverse_propensities(X, fold_ids, plan, eta, rows, threads):
    """(mean_{k != k(i)} 1/p_k, mean_{k != k(i)} 1/(1 - p_k)) for stacked logistic models, one
    fused pass per tile on the clipped logits (module docstring)."""
    z_lo, z_hi = math.log(eta / (1 - eta)), math.log((1 - eta) / eta)

    def tile(E: np.ndarray, own: tuple[np.ndarray, np.ndarray], sums: list[np.ndarray],
             ones: np.ndarray) -> None:
        np.clip(E, z_lo, z_hi, out=E)
        E[own] = 0.0                                # e^0 = 1 exactly: removed after the sum
        np.exp(E, out=E)
        sums[1] += E @ ones
        np.reciprocal(E, out=E)
        sums[0] += E @ ones

    def finish(total: np.ndarray) -> np.ndarray:    # 1/p = 1 + e^-z, 1/(1-p) = 1 + e^z
        return 1.0 + (total - 1.0) / (len(plan.models) - 1)

    inv1, inv0 = _fused(X, fold_ids, plan, tile, finish, 2, rows, threads,
                        _inverse_propensities(eta))
    return inv1, inv0


def _collapsed_outcome_means(X, fold_ids, plan, lo, hi, rows, threads) -> np.ndarray:
    """The out-of-fold clipped mean of stacked linear models: collapsed where provably exact
    (:func:`dpcausal.ate.linear_collapse.collapsed_means`), the fused pass on the other rows."""
    coef, intercept = plan.stacked[0], plan.stacked[1]
    means, exact = collapsed_means(X, fold_ids, coef, intercept, (lo, hi))
    rest = np.flatnonzero(~exact)
    if rest.size:

        def tile(P: np.ndarray, own: tuple[np.ndarray, np.ndarray], sums: list[np.ndarray],
                 ones: np.ndarray) -> None:
            np.clip(P, lo, hi, out=P)
            P[own] = 0.0
            sums[0] += P @ ones

        def finish(total: np.ndarray) -> np.ndarray:
            return total / (len(plan.models) - 1)

        (means[rest],) = _fused(X[rest], fold_ids[rest], plan, tile, finish, 1, rows, threads,
                                _clipped(lo, hi))
    return means


def _fused(X, fold_ids, plan, tile, finish, n_out, rows, threads, transform
           ) -> list[np.ndarray]:
    """Per block of ``rows`` rows and tile of ``_FUSED_COLS`` fold models: predict the tile (one
    small matrix product of [x, 1] and [coef; intercept]), then ``tile(block, own_entries, sums,
    ones)`` accumulates the block's row sums (as products with ``ones``, BLAS's summation),
    which ``finish`` turns into the means. Each thread predicts into one reused tile buffer:
    allocating a 1 MiB tile per step costs a mmap and its page faults when the allocator keeps
    large blocks out of its heap, as under Dask's worker default ``MALLOC_TRIM_THRESHOLD_``
    (measured 3x slower aggregation, two thirds of it system time). A block where a prediction
    could overflow (``max_i |x_i|_1 max |coef| + max |intercept|`` not far below the float
    range) goes to the blocked path with ``transform``, which replaces non-finite predictions
    by the public constant."""
    n, K = X.shape[0], len(plan.models)
    coef, intercept, _ = plan.stacked
    scale = float(np.abs(coef).max(initial=0.0))
    offset = float(np.abs(intercept).max(initial=0.0))
    weights = np.vstack([coef, intercept])                      # (d + 1, K)
    ones = np.ones(min(K, _FUSED_COLS))
    out = [np.empty(n) for _ in range(n_out)]
    local = threading.local()

    def work(start: int) -> None:
        stop = min(n, start + rows)
        x, k = X[start:stop], fold_ids[start:stop]
        if float(np.abs(x).sum(axis=1).max()) * scale + offset > _SAFE_MAGNITUDE:
            means = _oof_means(x, k, plan, transform, n_out, stop - start, 1)
        else:
            sums = [np.zeros(stop - start) for _ in range(n_out)]
            xa = np.hstack([x, np.ones((stop - start, 1))])
            if not hasattr(local, "tile"):  # one tile buffer per thread, reused (docstring)
                local.tile = np.empty(rows * min(K, _FUSED_COLS))
            for t0 in range(0, K, _FUSED_COLS):
                t1 = min(K, t0 + _FUSED_COLS)
                block = local.tile[:(stop - start) * (t1 - t0)].reshape(stop - start, t1 - t0)
                np.matmul(xa, weights[:, t0:t1], out=block)
                mine = np.flatnonzero((k >= t0) & (k < t1))
                tile(block, (mine, k[mine] - t0), sums, ones[:t1 - t0])
            means = [finish(s) for s in sums]
        for total, m in zip(out, means, strict=True):
            total[start:stop] = m

    _run_blocks(work, n, rows, threads)
    return out


def _inverse_propensities(eta: float) -> Callable:
    """(1/clip(p), 1/(1 - clip(p))), clip to [eta, 1 - eta]; on logits z, with z clipped to
    [logit eta, logit(1 - eta)]: 1/p = 1 + e^-z and 1/(1-p) = 1 + e^z (one exp, same values)."""
    z_lo, z_hi = math.log(eta / (1 - eta)), math.log((1 - eta) / eta)

    def transform(block: np.ndarray, on_logits: bool) -> tuple[np.ndarray, np.ndarray]:
        _replace_nonfinite(block, 0.0 if on_logits else 0.5)        # logit(1/2) = 0
        if on_logits:
            np.clip(block, z_lo, z_hi, out=block)
            inv0 = np.exp(block)
            inv1 = np.reciprocal(inv0, out=block)
            inv1 += 1.0
            inv0 += 1.0
            return inv1, inv0
        np.clip(block, eta, 1.0 - eta, out=block)
        inv0 = np.subtract(1.0, block)
        np.reciprocal(inv0, out=inv0)
        return np.reciprocal(block, out=block), inv0

    return transform


def _clipped(lo: float, hi: float) -> Callable:
    def transform(block: np.ndarray, on_logits: bool) -> tuple[np.ndarray]:
        if on_logits:                                   # a logistic model used as outcome model
            expit(block, out=block)
        _replace_nonfinite(block, (lo + hi) / 2)
        return (np.clip(block, lo, hi, out=block),)

    return transform


def _replace_nonfinite(block: np.ndarray, constant: float) -> None:
    """Set every NaN/inf entry of ``block`` to the public ``constant``, in place, so a
    non-finite prediction never reaches the release."""
    bad = ~np.isfinite(block)
    if bad.any():
        block[bad] = constant


def _oof_means(X, fold_ids, plan, transform, n_out, rows, threads) -> list[np.ndarray]:
    """(1/(K-1)) sum_{k != k(i)} transform(model_k(X_i)) for each output of ``transform``."""
    n, K = X.shape[0], len(plan.models)
    sums = [np.empty(n) for _ in range(n_out)]

    def work(start: int) -> None:
        stop = min(n, start + rows)
        block, on_logits = plan.predict(take_rows(X, slice(start, stop)))
        own = (np.arange(stop - start), fold_ids[start:stop])
        for total, values in zip(sums, transform(block, on_logits), strict=True):
            values[own] = 0.0                                   # exclude the row's own fold
            total[start:stop] = values.sum(axis=1)

    _run_blocks(work, n, rows, threads)
    for total in sums:
        total /= K - 1
    return sums


def _run_blocks(work: Callable[[int], None], n: int, rows: int, threads: int) -> None:
    """``work(start)`` for every block start, over ``threads`` threads when there are enough."""
    starts = range(0, n, rows)
    if threads > 1 and n > 4 * rows:
        list(_pool(threads, os.getpid()).map(work, starts))
    else:
        for start in starts:
            work(start)


@functools.cache
def _pool(threads: int, pid: int) -> ThreadPoolExecutor:
    """One pool of ``threads`` threads per process (``pid``: a forked child, whose copy of the
    parent's pool has no threads, makes its own), reused: a block ensemble aggregates hundreds
    of blocks per partition, and starting threads per call cost more than the call's work."""
    return ThreadPoolExecutor(threads, thread_name_prefix="dpcausal-aggregate")


@functools.cache
def _blas_controller() -> ThreadpoolController:
    return ThreadpoolController()


def one_blas_thread() -> ContextManager[Any]:
    """``threadpool_limits(limits=1, user_api="blas")`` on a controller built once: building
    one lists the process's loaded libraries (reading /proc/self/maps), about 1 ms per call,
    which a block ensemble paid per block. The BLAS libraries are those numpy and scipy loaded
    at import, before this module's first call."""
    return _blas_controller().limit(limits=1, user_api="blas")


class _PredictionPlan:
    """Predicts all K fold models on a block of rows: one matrix product when every model is
    linear (or every one logistic, returned as logits), fallback constants included, and X is a
    float array, else column by column. ``kind`` is "linear", "logistic" or None (generic)."""

    def __init__(self, models: Sequence, default: float, stackable: bool = True) -> None:
        self.models = list(models)
        self.default = default
        self.kind: str | None = None
        self.stacked: tuple[np.ndarray, np.ndarray, bool] | None = None
        fitted = [m is not None and not isinstance(m, float) for m in self.models]
        own = [linear_form(m) if f else None for m, f in zip(self.models, fitted, strict=True)]
        forms = [form for form, f in zip(own, fitted, strict=True) if f]
        kinds = {f[0] if f else None for f in forms}
        first = forms[0] if forms else None
        if stackable and len(kinds) == 1 and first is not None:
            kind = first[0]
            stacked = [form if f else self._constant_form(m, kind, first[1].size)
                       for m, f, form in zip(self.models, fitted, own, strict=True)]
            if all(f is not None for f in stacked):
                coef = np.column_stack([f[1] for f in stacked if f])      # (d, K)
                intercept = np.array([f[2] for f in stacked if f])         # (K,)
                if np.isfinite(coef).all() and np.isfinite(intercept).all():
                    self.kind = kind
                    self.stacked = (coef, intercept, kind == "logistic")
        entries = _BLOCK_ENTRIES if self.stacked is not None else _GENERIC_BLOCK_ENTRIES
        self.rows = max(1, entries // len(self.models))

    def _constant_form(self, model: float | None, kind: str, d: int
                       ) -> tuple[str, np.ndarray, float] | None:
        """A constant c (or the default for ``None``) as a zero-slope form of ``kind`` (logit c
        for logistic, which needs 0 < c < 1)."""
        c = self.default if model is None else model
        if kind == "logistic":
            if not 0.0 < c < 1.0:
                return None
            c = math.log(c / (1.0 - c))
        return kind, np.zeros(d), float(c)

    def predict(self, Xc: np.ndarray) -> tuple[np.ndarray, bool]:
        """(block of shape (rows, K), whether it holds logits rather than predictions)."""
        if self.stacked is not None:
            coef, intercept, logits = self.stacked
            block = Xc @ coef
            block += intercept
            return block, logits
        block = np.empty((Xc.shape[0], len(self.models)))
        for k, model in enumerate(self.models):
            block[:, k] = _predict_or_default(model, Xc, self.default)
        return block, False


def _predict_or_default(model: Any, Xc: Any, default: float) -> np.ndarray:
    """One fold model's predictions, or ``default`` for every row if the call raises or returns
    the wrong shape (a model may fail on inputs depending on what it was trained on)."""
    rows = Xc.shape[0]
    try:
        values = predict_nuisance(model, Xc, default)
        if values.shape == (rows,):
            return values
    except BaseException as exc:  # noqa: BLE001 - SystemExit too: never fail after the charge
        if not guarded(exc):
            raise
        private_log.error("a fold model's prediction raised; using the public constant",
                          exc_info=exc)
    return np.full(rows, default)
