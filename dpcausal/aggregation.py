"""Ensemble aggregation of out-of-fold predictions: spec dp_ate_ensemble.md §2.2 step 3 (eq. 5), §2.7.

For row i the K-1 models not trained on i's fold are combined: the harmonic mean for pi and,
separately, for 1 - pi (stored as the means of the inverses, as the authors' code does), and the
arithmetic mean for mu_1, mu_0. Predictions are clipped first (Assumption 4, §1.2).

Memory is O(n + chunk * K): rows are streamed in chunks, and inside a chunk the K predictions of a
row are summed with its own fold's entry set to exactly 0.0, so that a change to model k leaves
the aggregates of fold k's rows bit-for-bit unchanged (locality, spec §5 item 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy.special import expit

from dpcausal.nuisance import FoldModels, linear_form, predict_nuisance

# Entries of one (rows x K) prediction block; 2**21 float64 = 16 MiB per block.
_BLOCK_ENTRIES = 2**21


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


def aggregate(
    X: np.ndarray,
    fold_ids: np.ndarray,
    fold_models: Sequence[FoldModels],
    *,
    estimator: str,
    outcome_bounds: tuple[float, float],
    propensity_clip: float,
    chunk_size: int | None = None,
) -> EnsembleNuisances:
    """Eq. 5 with clipped fold predictions, streamed over row chunks: spec §2.2 step 3, §2.7 step 3."""
    K = len(fold_models)
    if [fm.k for fm in fold_models] != list(range(K)):
        raise ValueError("fold_models must be ordered by fold id 0..K-1")
    lo, hi = outcome_bounds
    eta = propensity_clip
    centre = (lo + hi) / 2.0

    def clip_pi(p: np.ndarray) -> np.ndarray:
        return np.clip(p, eta, 1.0 - eta)

    def clip_mu(m: np.ndarray) -> np.ndarray:
        return np.clip(m, lo, hi)

    out: dict[str, np.ndarray | None] = {}
    if estimator in ("ipw", "aipw"):
        props = [fm.propensity for fm in fold_models]
        out["inv_pi1"] = _oof_mean(X, fold_ids, props, lambda p: 1.0 / clip_pi(p), 0.5, chunk_size)
        out["inv_pi0"] = _oof_mean(
            X, fold_ids, props, lambda p: 1.0 / (1.0 - clip_pi(p)), 0.5, chunk_size
        )
    if estimator in ("g", "aipw"):
        for arm in ("mu1", "mu0"):
            models = [getattr(fm, arm) for fm in fold_models]
            out[arm] = _oof_mean(X, fold_ids, models, clip_mu, centre, chunk_size)
    return EnsembleNuisances(
        inv_pi1=out.get("inv_pi1"), inv_pi0=out.get("inv_pi0"),
        mu1=out.get("mu1"), mu0=out.get("mu0"),
    )


def _oof_mean(X, fold_ids, models, transform, default, chunk_size) -> np.ndarray:
    """(1/(K-1)) sum_{k != k(i)} transform(model_k(X_i)), streamed over chunks of rows."""
    n, K = X.shape[0], len(models)
    rows_per_chunk = chunk_size or max(1, _BLOCK_ENTRIES // K)
    plan = _PredictionPlan(models, default)
    total = np.empty(n)
    for start in range(0, n, rows_per_chunk):
        stop = min(n, start + rows_per_chunk)
        block = transform(plan.predict(X[start:stop]))            # (rows, K), clipped
        own = fold_ids[start:stop]
        block[np.arange(stop - start), own] = 0.0                 # exclude the row's own fold
        total[start:stop] = block.sum(axis=1)
    return total / (K - 1)


class _PredictionPlan:
    """Predicts all K fold models on a chunk: one matrix product for linear/logistic models
    (coefficients stacked), constants broadcast, any other model through its own predict."""

    def __init__(self, models: Sequence, default: float) -> None:
        self.models = list(models)
        self.default = default
        forms = [linear_form(m) if not isinstance(m, float) and m is not None else None
                 for m in self.models]
        self.lin_idx = np.array([k for k, f in enumerate(forms) if f and f[0] == "linear"], int)
        self.log_idx = np.array([k for k, f in enumerate(forms) if f and f[0] == "logistic"], int)
        self.const_idx = np.array(
            [k for k, m in enumerate(self.models) if m is None or isinstance(m, float)], int
        )
        self.const_val = np.array(
            [self.default if self.models[k] is None else self.models[k] for k in self.const_idx]
        )
        taken = set(self.lin_idx) | set(self.log_idx) | set(self.const_idx)
        self.generic_idx = [k for k in range(len(self.models)) if k not in taken]
        self.lin = self._stack(forms, self.lin_idx)
        self.log = self._stack(forms, self.log_idx)

    @staticmethod
    def _stack(forms, idx):
        if idx.size == 0:
            return None
        coef = np.column_stack([forms[k][1] for k in idx])          # (d, m)
        intercept = np.array([forms[k][2] for k in idx])            # (m,)
        return coef, intercept

    def predict(self, Xc: np.ndarray) -> np.ndarray:
        block = np.empty((Xc.shape[0], len(self.models)))
        if self.lin is not None:
            block[:, self.lin_idx] = Xc @ self.lin[0] + self.lin[1]
        if self.log is not None:
            block[:, self.log_idx] = expit(Xc @ self.log[0] + self.log[1])
        if self.const_idx.size:
            block[:, self.const_idx] = self.const_val
        for k in self.generic_idx:
            block[:, k] = predict_nuisance(self.models[k], Xc, self.default)
        return block
