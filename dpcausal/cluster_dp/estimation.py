"""Debiased ATE estimation from a Cluster-DP release and its variance estimator
(spec cluster_dp.md §3).

All functions here are post-processing: they see only (cluster, arm, y_tilde), q_tilde and lambda.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import norm

from dpcausal._results import ResultMixin

STRATA = ("clusters", "none")


def debias(y_tilde: np.ndarray, m: np.ndarray, lam: float) -> np.ndarray:
    """Per-unit debiased value y_hat = (y_tilde - lam m_{c,a}) / (1 - lam): Theorem 3.2 / eq. 27,
    spec §3.1.

    This is entry y_tilde of yvec^T Q^{-1} with Q^{-1} = (I - lam q_t 1^T)/(1 - lam)
    (Sherman-Morrison).
    """
    return (np.asarray(y_tilde, dtype=float) - lam * np.asarray(m, dtype=float)) / (1.0 - lam)


def unit_weights(s: np.ndarray, z: np.ndarray, S: int) -> np.ndarray:
    """Weights w_i with tau_hat = sum_i w_i v_i: (n_s/n)(z_i/n_{1,s} - (1-z_i)/n_{0,s}), eq. (5),
    spec §1.1."""
    z2 = np.atleast_2d(z)
    s2 = np.broadcast_to(s, z2.shape)
    R, n = z2.shape
    cell = np.arange(R)[:, None] * 2 * S + 2 * s2 + z2
    n_cell = np.bincount(cell.ravel(), minlength=R * 2 * S).reshape(R, 2 * S)
    n_s = n_cell[:, 0::2] + n_cell[:, 1::2]
    own = np.take_along_axis(n_cell, 2 * s2 + z2, axis=1)
    ns_i = np.take_along_axis(n_s, s2, axis=1)
    return (ns_i / n) * np.where(z2 == 1, 1.0, -1.0) / own


def stratified_dim(
    v: np.ndarray, s: np.ndarray, z: np.ndarray, S: int
) -> tuple[np.ndarray, np.ndarray]:
    """Stratified difference in means and its Neyman-type variance estimate, per repetition.

    tau_hat = sum_s (n_s/n)(mean_{1,s} v - mean_{0,s} v) (eq. 5 / Theorem 3.2, spec §3.1) and
    V_hat = sum_s (n_s/n)^2 (s^2_{1,s}/n_{1,s} + s^2_{0,s}/n_{0,s}) (spec §3.6); a cell with one
    unit gives V_hat = nan. Shapes: v (R, n) or (n,), s (n,) codes 0..S-1, z (n,) or (R, n).
    """
    v2 = np.atleast_2d(np.asarray(v, dtype=float))
    z2 = np.broadcast_to(np.atleast_2d(z), v2.shape)
    s2 = np.broadcast_to(s, v2.shape)
    R, n = v2.shape
    cell = (np.arange(R)[:, None] * 2 * S + 2 * s2 + z2).ravel()
    cnt = np.bincount(cell, minlength=R * 2 * S).reshape(R, S, 2).astype(float)
    tot = np.bincount(cell, weights=v2.ravel(), minlength=R * 2 * S).reshape(R, S, 2)
    mean = tot / cnt
    dev = v2 - mean.reshape(R, 2 * S)[np.arange(R)[:, None], 2 * s2 + z2]
    ss = np.bincount(cell, weights=(dev * dev).ravel(), minlength=R * 2 * S).reshape(R, S, 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        s2_cell = np.where(cnt > 1, ss / (cnt - 1), np.nan)
    wgt = cnt.sum(axis=2) / n  # n_s / n
    tau = np.sum(wgt * (mean[..., 1] - mean[..., 0]), axis=1)
    vhat = np.sum(wgt**2 * (s2_cell[..., 1] / cnt[..., 1] + s2_cell[..., 0] / cnt[..., 0]), axis=1)
    return tau, vhat


@dataclass(frozen=True)
class ClusterDPEstimate(ResultMixin):
    """ATE estimate from a Cluster-DP release (post-processing; spec §3.1, §3.6).

    ``variance`` is the conservative estimate V_hat of spec §3.6; ``ci`` is the normal interval.
    """

    ate: float
    variance: float
    se: float
    ci: tuple[float, float]
    level: float
    strata: str
    n: int

    def __post_init__(self) -> None:
        if self.strata not in STRATA:
            raise ValueError(f"strata must be one of {STRATA}, got {self.strata!r}")
        if not 0 < self.level < 1:
            raise ValueError(f"level must be in (0, 1), got {self.level!r}")
        if np.isfinite(self.variance) and self.variance < 0:
            raise AssertionError(f"bug: negative variance estimate {self.variance}")


def make_estimate(tau: float, vhat: float, strata: str, level: float, n: int) -> ClusterDPEstimate:
    """Wrap a point estimate and V_hat into a result with a normal CI: tau ± z_{(1+level)/2}
    sqrt(V_hat), spec §3.6."""
    se = float(np.sqrt(vhat))
    zq = float(norm.ppf(0.5 + level / 2))
    return ClusterDPEstimate(
        ate=float(tau),
        variance=float(vhat),
        se=se,
        ci=(float(tau - zq * se), float(tau + zq * se)),
        level=level,
        strata=strata,
        n=int(n),
    )
